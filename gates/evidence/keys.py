"""The server's evidence signing keys: created on first use and kept encrypted with the
credential keyring (or read from TOLLGATE_SIGNING_KEY_FILE), rotated by a command; retired
keys stay listed with their validity so old bundles still verify. Django side."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

from gates.errors import ServiceError
from gates.evidence import statement
from gates.models import EvidenceKey
from gates.services.hosts.access import keyring

# Serializes the first creation of a key across workers (two would each sign with their own).
KEY_LOCK = 0x7011_6A7E


def key_active() -> EvidenceKey:
    """The key that signs now: the configured file's, or the newest valid stored one (made on
    first use)."""
    if settings.TOLLGATE_SIGNING_KEY_FILE:
        return _file_key(Path(settings.TOLLGATE_SIGNING_KEY_FILE))
    found = _valid_keys().first()
    if found is not None:
        return found
    with transaction.atomic():
        _lock_keys()
        return _valid_keys().first() or _key_create()


def key_rotate(*, valid_days: int | None = None) -> EvidenceKey:
    """Retire every stored key now and make a new one; the old ones stay listed."""
    if settings.TOLLGATE_SIGNING_KEY_FILE:
        raise ServiceError(
            "the signing key is read from TOLLGATE_SIGNING_KEY_FILE: replace that file instead",
            field="TOLLGATE_SIGNING_KEY_FILE",
        )
    now = timezone.now()
    with transaction.atomic():
        _lock_keys()
        EvidenceKey.objects.filter(retired_at__isnull=True).update(retired_at=now)
        EvidenceKey.objects.filter(Q(not_after__isnull=True) | Q(not_after__gt=now)).update(
            not_after=now
        )
        return _key_create(valid_days=valid_days)


def key_sign(key: EvidenceKey, payload: bytes) -> bytes:
    """The DSSE signature of `key` over `payload`, made with securesystemslib's Envelope."""
    private = _private_key(key)
    public = SSlibKey.from_crypto(private.public_key(), keyid=key.fingerprint)
    envelope = Envelope(payload, statement.PAYLOAD_TYPE, {})
    signature = envelope.sign(CryptoSigner(private, public))
    return bytes.fromhex(signature.signature)


def _lock_keys() -> None:
    """Until the transaction ends, no other worker makes or rotates a key. SQLite (the embedded
    demo) locks the whole database on write, which serializes the same way."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [KEY_LOCK])


def _valid_keys():
    now = timezone.now()
    return EvidenceKey.objects.filter(
        Q(not_after__isnull=True) | Q(not_after__gt=now),
        retired_at__isnull=True,
        not_before__lte=now,
        source=EvidenceKey.Source.DATABASE,
    ).order_by("-not_before", "-id")


def _key_create(*, valid_days: int | None = None) -> EvidenceKey:
    private = Ed25519PrivateKey.generate()
    fingerprint = statement.key_fingerprint(private.public_key())
    raw = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    now = timezone.now()
    return EvidenceKey.objects.create(
        fingerprint=fingerprint,
        **_public_fields(private),
        private_key_encrypted=keyring().encrypt(raw, associated_data=_aad(fingerprint)),
        not_before=now,
        not_after=now + timedelta(days=valid_days) if valid_days else None,
    )


def _file_key(path: Path) -> EvidenceKey:
    private = _load_file(path)
    fingerprint = statement.key_fingerprint(private.public_key())
    key, _ = EvidenceKey.objects.get_or_create(
        fingerprint=fingerprint,
        defaults={**_public_fields(private), "source": EvidenceKey.Source.FILE},
    )
    return key


def _public_fields(private: Ed25519PrivateKey) -> dict:
    public = private.public_key()
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {"public_key": statement.openssh_line(public), "public_pem": pem.decode()}


def _private_key(key: EvidenceKey) -> Ed25519PrivateKey:
    if key.source == EvidenceKey.Source.FILE:
        return _load_file(Path(settings.TOLLGATE_SIGNING_KEY_FILE))
    raw = keyring().decrypt(bytes(key.private_key_encrypted), associated_data=_aad(key.fingerprint))
    return Ed25519PrivateKey.from_private_bytes(raw)


def _load_file(path: Path) -> Ed25519PrivateKey:
    try:
        private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError) as error:
        raise ServiceError(
            f"cannot read the signing key {path}: {error}", field="TOLLGATE_SIGNING_KEY_FILE"
        ) from error
    if not isinstance(private, Ed25519PrivateKey):
        raise ServiceError("the signing key must be Ed25519", field="TOLLGATE_SIGNING_KEY_FILE")
    return private


def _aad(fingerprint: str) -> bytes:
    # Binds the ciphertext to its row: a private key copied onto another key's row won't open.
    return f"tollgate:evidence-key:{fingerprint}".encode()
