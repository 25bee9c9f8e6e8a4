"""Local file handling shared by the transports: SHA-256 of a file, and copy-verify-rename.

Imports no paramiko. A file only appears under its final name once its digest matched.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from runners.errors import InfrastructureError

CHUNK_BYTES = 1 << 20

# Run on the host with python3 (always present there): sha256sum is not everywhere.
REMOTE_SHA256 = (
    "import hashlib, sys\n"
    "h = hashlib.sha256()\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    for block in iter(lambda: f.read(1 << 20), b''):\n"
    "        h.update(block)\n"
    "print(h.hexdigest())\n"
)


def sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def local_sha256(path: str, *, host: str, step: str) -> str:
    """sha256_of_file, with an unreadable file reported as a permanent InfrastructureError."""
    try:
        return sha256_of_file(path)
    except OSError as problem:
        raise InfrastructureError(
            f"cannot read {path}: {problem.strerror}", permanent=True, host=host, step=step
        ) from None


def temporary_name(path: str) -> str:
    """A sibling name for a partial file: same directory, so the final rename is atomic."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.part-{secrets.token_hex(4)}")


@contextmanager
def partial_file(path: str) -> Iterator[str]:
    """Yield a temporary sibling of `path`; it is removed unless the caller renamed it."""
    partial = temporary_name(path)
    try:
        yield partial
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def cut_to_whole_lines(data: bytes, max_bytes: int) -> bytes:
    """Drop a trailing partial line so a reader's offset always lands on a line boundary.

    A full read with no newline at all is one line longer than max_bytes: it is handed over
    in pieces, or the reader would stall on it forever.
    """
    end = data.rfind(b"\n")
    if end < 0:
        return data if len(data) >= max_bytes else b""
    return data[: end + 1]
