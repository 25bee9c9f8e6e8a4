from __future__ import annotations

import base64
import os

import pytest
from django.db import connection

from gates import services
from gates.crypto import CryptoError, Keyring, host_credential_aad, new_api_token, token_digest
from gates.errors import ServiceError
from gates.models import ApiToken, Host
from tests.conftest import PRIVATE_KEY, make_host


def keyring(*keys: bytes) -> Keyring:
    return Keyring.from_base64([base64.b64encode(k).decode() for k in keys])


NEW, OLD = os.urandom(32), os.urandom(32)
AAD = host_credential_aad(1, 2)


def test_it_round_trips_and_the_ciphertext_hides_the_plaintext():
    blob = keyring(NEW).encrypt(b"secret key material", associated_data=AAD)
    assert b"secret" not in blob
    assert keyring(NEW).decrypt(blob, associated_data=AAD) == b"secret key material"


def test_a_secret_encrypted_with_the_old_key_decrypts_after_rotation():
    blob = keyring(OLD).encrypt(b"k", associated_data=AAD)
    rotated = keyring(NEW, OLD)
    assert rotated.needs_rotation(blob)
    assert rotated.decrypt(blob, associated_data=AAD) == b"k"


def test_a_dropped_key_is_reported_not_crashed():
    blob = keyring(OLD).encrypt(b"k", associated_data=AAD)
    with pytest.raises(CryptoError, match="no longer configured"):
        keyring(NEW).decrypt(blob, associated_data=AAD)


def test_a_ciphertext_copied_to_another_row_does_not_decrypt():
    blob = keyring(NEW).encrypt(b"k", associated_data=host_credential_aad(1, 2))
    with pytest.raises(CryptoError, match="another row"):
        keyring(NEW).decrypt(blob, associated_data=host_credential_aad(9, 2))


def test_tampering_is_detected():
    blob = bytearray(keyring(NEW).encrypt(b"k", associated_data=AAD))
    blob[-1] ^= 1
    with pytest.raises(CryptoError):
        keyring(NEW).decrypt(bytes(blob), associated_data=AAD)


@pytest.mark.parametrize(
    "keys, message",
    [
        ([], "empty"),
        (["not base64!"], "not base64"),
        ([base64.b64encode(b"short").decode()], "32 bytes"),
    ],
)
def test_bad_keys_are_named(keys, message):
    with pytest.raises(CryptoError, match=message):
        Keyring.from_base64(keys)


def test_api_tokens_are_random_and_only_their_digest_is_kept():
    token, prefix, digest = new_api_token()
    assert token.startswith(f"tg_{prefix}_") and digest == token_digest(token)
    assert new_api_token()[0] != token


@pytest.mark.django_db
class TestStoredSecrets:
    def test_the_raw_credential_column_holds_no_key_material(self, customer_org):
        host = make_host(customer_org)
        services.host_set_credential(host=host, private_key=PRIVATE_KEY)
        with connection.cursor() as cursor:
            cursor.execute("SELECT credential_ciphertext FROM gates_host WHERE id = %s", [host.pk])
            raw = bytes(cursor.fetchone()[0])
        assert b"OPENSSH" not in raw and b"b3BlbnNzaC1rZXktdjE" not in raw
        assert services.host_credential(Host.objects.get(pk=host.pk)) == PRIVATE_KEY

    def test_a_credential_moved_to_another_host_row_fails_cleanly(self, customer_org):
        first, second = make_host(customer_org, "a"), make_host(customer_org, "b")
        services.host_set_credential(host=first, private_key=PRIVATE_KEY)
        Host.objects.filter(pk=second.pk).update(
            credential_ciphertext=Host.objects.get(pk=first.pk).credential_ciphertext
        )
        with pytest.raises(ServiceError, match="another row"):
            services.host_credential(Host.objects.get(pk=second.pk))

    def test_rotation_reencrypts_with_the_newest_key(self, customer_org, settings):
        host = make_host(customer_org)
        services.host_set_credential(host=host, private_key=PRIVATE_KEY)
        newest = base64.b64encode(os.urandom(32)).decode()
        settings.TOLLGATE_ENCRYPTION_KEYS = [newest, *settings.TOLLGATE_ENCRYPTION_KEYS]
        assert services.host_rotate_credentials() == 1
        settings.TOLLGATE_ENCRYPTION_KEYS = [newest]
        assert services.host_credential(Host.objects.get(pk=host.pk)) == PRIVATE_KEY

    def test_the_raw_token_column_holds_only_a_digest(self, vendor_admin, vendor_org):
        from gates.tenancy import viewer_for_user

        token, secret = services.api_token_create(
            actor=services.Actor(user=vendor_admin),
            viewer=viewer_for_user(vendor_admin),
            organization=vendor_org,
            name="ci",
            scopes=["read"],
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM gates_apitoken WHERE id = %s", [token.pk])
            row = " ".join(str(value) for value in cursor.fetchone())
        assert secret not in row and secret.split("_", 2)[2] not in row
        assert ApiToken.objects.get(pk=token.pk).digest == token_digest(secret)
