"""Secrets at rest: AES-256-GCM with rotatable keys, and API token digests.

Keys come from settings.TOLLGATE_ENCRYPTION_KEYS (base64, newest first): the first encrypts,
every listed key may decrypt, so a key can be rotated in without breaking stored secrets.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# Ciphertext layout: FORMAT (1 byte) | key id (4) | nonce (12) | AES-GCM ciphertext + tag.
FORMAT_V1 = b"\x01"
KEY_ID_BYTES = 4
NONCE_BYTES = 12
TOKEN_PREFIX = "tg"


class CryptoError(Exception):
    """A secret cannot be encrypted or decrypted (missing key, tampering, wrong row)."""


@dataclass(frozen=True)
class Keyring:
    keys: tuple[bytes, ...]

    @classmethod
    def from_base64(cls, encoded: list[str]) -> Keyring:
        if not encoded:
            raise CryptoError("TOLLGATE_ENCRYPTION_KEYS is empty: no key to encrypt with")
        keys = []
        for position, text in enumerate(encoded):
            try:
                key = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError) as error:
                raise CryptoError(f"TOLLGATE_ENCRYPTION_KEYS[{position}] is not base64") from error
            if len(key) != 32:
                raise CryptoError(
                    f"TOLLGATE_ENCRYPTION_KEYS[{position}] must be 32 bytes, not {len(key)}"
                )
            keys.append(key)
        return cls(tuple(keys))

    def encrypt(self, plaintext: bytes, *, associated_data: bytes) -> bytes:
        key = self.keys[0]
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(key).encrypt(nonce, plaintext, associated_data)
        return FORMAT_V1 + key_id(key) + nonce + sealed

    def decrypt(self, blob: bytes, *, associated_data: bytes) -> bytes:
        blob = bytes(blob)
        header = 1 + KEY_ID_BYTES + NONCE_BYTES
        if len(blob) <= header or blob[:1] != FORMAT_V1:
            raise CryptoError("stored secret is not in a known format")
        wanted_id, nonce, sealed = blob[1:5], blob[5:header], blob[header:]
        for key in self.keys:
            if hmac.compare_digest(key_id(key), wanted_id):
                try:
                    return AESGCM(key).decrypt(nonce, sealed, associated_data)
                except InvalidTag as error:
                    raise CryptoError(
                        "stored secret failed authentication (tampered, or copied from another row)"
                    ) from error
        raise CryptoError("stored secret was encrypted with a key that is no longer configured")

    def needs_rotation(self, blob: bytes) -> bool:
        return bytes(blob)[1:5] != key_id(self.keys[0])


def key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"tollgate-key-id" + key).digest()[:KEY_ID_BYTES]


def generate_key() -> str:
    """A fresh base64 AES-256 key for TOLLGATE_ENCRYPTION_KEYS."""
    return base64.b64encode(os.urandom(32)).decode()


def host_credential_aad(organization_id: int, host_id: int) -> bytes:
    # Binding the ciphertext to its row: a key copied into another org's host won't decrypt.
    return f"tollgate:host-credential:org={organization_id}:host={host_id}".encode()


def new_api_token() -> tuple[str, str, str]:
    """Return (token shown once, public prefix, SHA-256 digest stored)."""
    prefix = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    return token, prefix, token_digest(token)


def split_api_token(token: str) -> str | None:
    """The prefix of a well-formed token, or None."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or len(parts[1]) != 12:
        return None
    return parts[1]


def token_digest(token: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is safe: there is nothing to brute-force.
    return hashlib.sha256(token.encode()).hexdigest()
