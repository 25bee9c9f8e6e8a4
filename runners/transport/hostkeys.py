"""OpenSSH public host key lines: parsing and SHA-256 fingerprints, as `ssh-keygen -l` shows them.

Pure: no I/O and no paramiko, so the Django side can validate a pasted key without connecting.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

from runners.errors import SpecError

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)


@dataclass(frozen=True)
class HostKey:
    """One public key: its algorithm name and the raw key blob (the base64 part, decoded)."""

    key_type: str
    blob: bytes

    @property
    def line(self) -> str:
        return f"{self.key_type} {base64.b64encode(self.blob).decode('ascii')}"

    @property
    def fingerprint(self) -> str:
        return fingerprint_of_blob(self.blob)


def fingerprint_of_blob(blob: bytes) -> str:
    """`SHA256:<base64 without padding>`, the format OpenSSH prints since 6.8."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def known_hosts_name(address: str, port: int) -> str:
    """The name a pinned key is looked up under, as in known_hosts: `[addr]:port` off port 22."""
    return address if port == 22 else f"[{address}]:{port}"


def parse_host_key(line: str, *, field: str = "host_key") -> HostKey:
    """Parse "TYPE BASE64 [comment]"; refuse anything that is not a well-formed public key."""
    parts = line.strip().split() if isinstance(line, str) else []
    if len(parts) < 2:
        raise SpecError("expected an OpenSSH public key line: 'TYPE BASE64 [comment]'", field=field)
    key_type, encoded = parts[0], parts[1]
    if key_type not in KEY_TYPES:
        raise SpecError(f"unsupported key type {key_type[:40]!r}", field=field)
    try:
        blob = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise SpecError("the key is not valid base64", field=field) from None
    if _embedded_type(blob) != key_type:
        raise SpecError(f"the key data does not hold a {key_type} key", field=field)
    return HostKey(key_type, blob)


def _embedded_type(blob: bytes) -> str | None:
    # The blob starts with the algorithm name as an SSH string: uint32 length + bytes.
    if len(blob) < 4:
        return None
    (length,) = struct.unpack(">I", blob[:4])
    name = blob[4 : 4 + length]
    return name.decode("ascii", "replace") if len(name) == length else None
