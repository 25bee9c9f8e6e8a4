"""Checks an OpenSSH signature (`ssh-keygen -Y sign`, the SSHSIG format) over a spec digest, so a
party's signature can be verified without trusting Tollgate's user accounts.

Pure: text in, a key fingerprint or an error out. The SSHSIG framing follows OpenSSH's
PROTOCOL.sshsig; the cryptography itself is `cryptography`'s Ed25519 (already pinned for the
credential store), so no second crypto library is needed for a few dozen lines of framing.
Only Ed25519 keys are accepted.

    printf %s DIGEST > spec.digest
    ssh-keygen -Y sign -f ~/.ssh/id_ed25519 -n tollgate-spec spec.digest   # -> spec.digest.sig
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

NAMESPACE = "tollgate-spec"
MAGIC = b"SSHSIG"
ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
ARMOR_END = "-----END SSH SIGNATURE-----"
KEY_TYPE = "ssh-ed25519"
HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}


class SshSigError(ValueError):
    """The key or signature is malformed, of the wrong kind, or does not verify."""


def public_key_blob(line: str) -> bytes:
    """The wire blob of an OpenSSH `ssh-ed25519 AAAA... comment` line; refuses other kinds."""
    parts = (line or "").strip().split()
    if len(parts) < 2 or parts[0] != KEY_TYPE:
        raise SshSigError("give an OpenSSH Ed25519 public key line (ssh-ed25519 AAAA...)")
    blob = _b64(parts[1], "public key")
    reader = _Reader(blob)
    if reader.string() != KEY_TYPE.encode() or len(reader.string()) != 32 or not reader.done:
        raise SshSigError("the public key is not a well-formed Ed25519 key")
    return blob


def fingerprint(blob: bytes) -> str:
    """The fingerprint `ssh-keygen -l` prints: SHA256:base64 without padding."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def verify(armored: str, message: bytes, *, namespace: str = NAMESPACE) -> bytes:
    """Verify an armored SSHSIG over `message`; returns the signer's public key blob."""
    reader = _Reader(_unarmor(armored))
    if reader.take(6) != MAGIC or reader.uint32() != 1:
        raise SshSigError("not an SSHSIG version 1 signature")
    key_blob = reader.string()
    signed_namespace = reader.string().decode(errors="replace")
    reserved = reader.string()
    hash_name = reader.string().decode(errors="replace")
    signature = _Reader(reader.string())
    if signed_namespace != namespace:
        raise SshSigError(f"the signature is for namespace {signed_namespace!r}, not {namespace!r}")
    if hash_name not in HASHES:
        raise SshSigError(f"unsupported hash {hash_name!r}")
    if signature.string() != KEY_TYPE.encode():
        raise SshSigError("only Ed25519 signatures are accepted")
    key = _Reader(key_blob)
    if key.string() != KEY_TYPE.encode():
        raise SshSigError("only Ed25519 keys are accepted")
    try:
        public = Ed25519PublicKey.from_public_bytes(key.string())
    except ValueError as error:
        raise SshSigError("the signing key is not a well-formed Ed25519 key") from error
    signed = (
        MAGIC
        + _string(namespace.encode())
        + _string(reserved)
        + _string(hash_name.encode())
        + _string(HASHES[hash_name](message).digest())
    )
    try:
        public.verify(signature.string(), signed)
    except InvalidSignature as error:
        raise SshSigError("the signature does not verify for this digest") from error
    return key_blob


def _unarmor(armored: str) -> bytes:
    text = (armored or "").strip()
    if not (text.startswith(ARMOR_BEGIN) and text.endswith(ARMOR_END)):
        raise SshSigError("give the whole armored signature (-----BEGIN SSH SIGNATURE-----)")
    body = "".join(text[len(ARMOR_BEGIN) : -len(ARMOR_END)].split())
    return _b64(body, "signature")


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise SshSigError(f"the {what} is not valid base64") from error


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, count: int) -> bytes:
        if self.at + count > len(self.data):
            raise SshSigError("truncated SSH data")
        chunk = self.data[self.at : self.at + count]
        self.at += count
        return chunk

    def uint32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def string(self) -> bytes:
        return self.take(self.uint32())

    @property
    def done(self) -> bool:
        return self.at == len(self.data)
