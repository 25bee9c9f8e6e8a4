"""File handling shared by the transports: SHA-256 of a file here or on the host, and
copy-verify-rename. Imports no paramiko. A file only appears under its final name once its
digest matched.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runners.errors import InfrastructureError, SpecError
from runners.transport.types import CommandResult

CHUNK_BYTES = 1 << 20
FILE_TIMEOUT = 60.0
# A transport's run(argv, timeout=...): the remote helpers below need nothing else of it.
Runner = Callable[..., CommandResult]

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


def remote_sha256(run: Runner, path: str, *, host: str, step: str) -> str:
    """The SHA-256 of a file on the host, computed there."""
    result = run(["python3", "-c", REMOTE_SHA256, path], timeout=FILE_TIMEOUT)
    if not result.ok:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfrastructureError(
            f"cannot hash {path}: {last}", permanent=True, host=host, step=step
        )
    return result.stdout.strip()


def make_remote_parent(run: Runner, path: str, *, host: str, step: str) -> None:
    parent = posixpath.dirname(path) or "."
    result = run(["mkdir", "-p", parent], timeout=FILE_TIMEOUT)
    if not result.ok:
        raise InfrastructureError(
            f"cannot create {parent}: {result.stderr.strip()[-300:]}",
            permanent=True,
            host=host,
            step=step,
        )


# How a digest check names its two sides: (the copy, the source).
RECEIVED = ("received", "on the host")
SENT = ("on the host", "sent")
COPIED = ("after copy", "at the source")


def check_digest(
    found: str, expected: str, *, sides: tuple[str, str], host: str, step: str
) -> None:
    """Refuse a copy whose SHA-256 is not the source's; `sides` names the copy and the source."""
    if found != expected:
        copy, source = sides
        raise InfrastructureError(
            f"SHA-256 mismatch: {found} {copy}, {expected} {source}", host=host, step=step
        )


def file_problem(problem: BaseException, *, host: str, step: str) -> BaseException | None:
    """What a failed file copy means as a runner error; None when it is not about the files
    (a network failure, for the transport to classify)."""
    if isinstance(problem, InfrastructureError | SpecError):
        return problem
    if isinstance(problem, FileNotFoundError | PermissionError | IsADirectoryError):
        return InfrastructureError(str(problem), permanent=True, host=host, step=step)
    return None


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
