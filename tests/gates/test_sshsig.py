"""Signatures made with a party's own Ed25519 key (`ssh-keygen -Y sign`, the real tool) verify
over the spec digest they were made for, and over no other."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from gates import sshsig
from gates.models import AuditEvent, SpecSignature

needs_ssh_keygen = pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="needs ssh-keygen")


def keygen(folder: Path, name: str = "id_ed25519") -> Path:
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key


def ssh_sign(key: Path, message: str, folder: Path, namespace: str = sshsig.NAMESPACE) -> str:
    data = folder / "spec.digest"
    data.write_text(message)
    subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace, str(data)],
        check=True,
        capture_output=True,
    )
    signature = Path(f"{data}.sig")
    text = signature.read_text()
    signature.unlink()
    return text


@needs_ssh_keygen
class TestVerify:
    def test_a_signature_verifies_over_its_digest_and_names_the_key(self, tmp_path):
        key = keygen(tmp_path)
        blob = sshsig.verify(ssh_sign(key, "ab" * 32, tmp_path), ("ab" * 32).encode())
        printed = subprocess.run(
            ["ssh-keygen", "-lf", f"{key}.pub"], check=True, capture_output=True, text=True
        ).stdout.split()[1]
        assert sshsig.fingerprint(blob) == printed
        assert blob == sshsig.public_key_blob(Path(f"{key}.pub").read_text())

    def test_a_signature_over_another_digest_does_not_verify(self, tmp_path):
        signature = ssh_sign(keygen(tmp_path), "ab" * 32, tmp_path)
        with pytest.raises(sshsig.SshSigError, match="does not verify"):
            sshsig.verify(signature, ("cd" * 32).encode())

    def test_a_signature_for_another_namespace_is_refused(self, tmp_path):
        signature = ssh_sign(keygen(tmp_path), "ab" * 32, tmp_path, namespace="file")
        with pytest.raises(sshsig.SshSigError, match="namespace"):
            sshsig.verify(signature, ("ab" * 32).encode())

    @pytest.mark.parametrize(
        "text",
        ["", "hello", "-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----"],
    )
    def test_malformed_signatures_are_refused_in_words(self, text):
        with pytest.raises(sshsig.SshSigError):
            sshsig.verify(text, b"x")

    def test_a_key_that_is_not_ed25519_is_refused(self, tmp_path):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(tmp_path / "ec")], check=True
        )
        with pytest.raises(sshsig.SshSigError, match="Ed25519"):
            sshsig.public_key_blob((tmp_path / "ec.pub").read_text())


@needs_ssh_keygen
@pytest.mark.django_db
class TestSigningWithARegisteredKey:
    def client(self, user) -> APIClient:
        client = APIClient()
        client.force_login(user)
        return client

    def register(self, client, key: Path):
        public_key = Path(f"{key}.pub").read_text()
        return client.post(reverse("api:party-keys"), {"public_key": public_key}, format="json")

    def sign(self, client, gate, signature: str):
        return client.post(
            reverse("api:gate-spec-sign", args=[gate.pk]),
            {"version": 1, "ssh_signature": signature},
            format="json",
        )

    def test_the_customers_own_signature_is_checked_and_kept(
        self, customer_owner, engagement, tmp_path
    ):
        gate = engagement.gates.get(kind="G1")
        client = self.client(customer_owner)
        key = keygen(tmp_path)
        registered = self.register(client, key)
        assert registered.status_code == 201, registered.json()
        signed = self.sign(client, gate, ssh_sign(key, gate.current_spec.digest, tmp_path))
        assert signed.status_code == 200, signed.json()
        row = SpecSignature.objects.get()
        assert row.key.fingerprint == registered.json()["fingerprint"]
        assert sshsig.verify(row.ssh_signature, row.digest.encode())  # checkable offline
        [shown] = signed.json()["signatures"]
        assert shown["key_fingerprint"] == row.key.fingerprint
        audit = AuditEvent.objects.get(action="spec.sign")
        assert audit.detail["key"] == row.key.fingerprint

    def test_a_signature_over_another_digest_is_refused(self, customer_owner, engagement, tmp_path):
        gate = engagement.gates.get(kind="G1")
        client = self.client(customer_owner)
        key = keygen(tmp_path)
        self.register(client, key)
        refused = self.sign(client, gate, ssh_sign(key, "0" * 64, tmp_path))
        assert refused.status_code == 400
        assert refused.json()["field"] == "ssh_signature"
        assert not SpecSignature.objects.exists()

    def test_a_key_nobody_registered_is_refused(self, customer_owner, engagement, tmp_path):
        gate = engagement.gates.get(kind="G1")
        key = keygen(tmp_path)
        refused = self.sign(
            self.client(customer_owner), gate, ssh_sign(key, gate.current_spec.digest, tmp_path)
        )
        assert refused.status_code == 400 and "not registered" in refused.json()["detail"]

    def test_a_viewer_cannot_register_a_signing_key(self, customer_viewer, tmp_path):
        response = self.register(self.client(customer_viewer), keygen(tmp_path))
        assert response.status_code == 403
