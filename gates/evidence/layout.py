"""The bundle's bytes: member names, canonical JSON, and the deterministic zip.

Pure: plain data in, bytes out (and back). Same members -> same bytes: entries sorted by name,
every timestamp 1980-01-01, fixed permissions and one fixed compression (DEFLATE level 9).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from typing import Any

from gates.specs.schema import MAX_SOAK_WINDOWS

# Members that carry the signatures over the others, so the signed statement cannot list them.
ENVELOPE = "envelope.dsse.json"
COSIGNATURES = "cosignatures.json"
SERVER_KEY = "signing-key.pub"
# The exact bytes a party co-signs (the DSSE pre-authentication encoding of the payload).
TO_COSIGN = "to-cosign.pae"
# The server's signed record of the raw files retention dropped after the seal (an envelope of
# its own over the sealed envelope's digest: gates/evidence/retention.py).
RETENTION = "retention.dsse.json"
UNSIGNED = (ENVELOPE, COSIGNATURES, SERVER_KEY, TO_COSIGN, RETENTION)

SPEC = "spec/spec.json"
SPEC_SIGNATURES = "spec/signatures.json"
INVENTORY = "inventory/g1.json"
# The amendments both parties had signed when the decision was made (absent from older seals).
INVENTORY_AMENDMENTS = "inventory/amendments.json"
DECISION = "decision/decision.json"
OPERATING_CHARACTERISTIC = "decision/operating_characteristic.json"
CONTEXT = "decision/context.json"
VERSIONS = "versions.json"
# Under a run's prefix: a soak's stored windows (its samples), beside the windows' raw files.
SOAK_WINDOWS = "soak-windows.json"

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
UNIX = 3
FILE_MODE = 0o100644 << 16
COMPRESSION_LEVEL = 9
# Members a bundle may hold: a soak at its window limit with ten raw files a window, and room for
# the rest. Memory is bounded by the members' declared sizes, checked before any is read.
MAX_MEMBERS = MAX_SOAK_WINDOWS * 10 + 20_000
MAX_BUNDLE_BYTES = 4 << 30


class BundleFormatError(ValueError):
    """The bytes are not a bundle this verifier can read; the message says what is wrong."""


def canonical_json(value: object) -> bytes:
    """The one JSON encoding of every JSON member: sorted keys, two-space indent, UTF-8."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def run_prefix(attempt: int) -> str:
    return f"runs/attempt-{attempt}/"


# Under a carrying run's prefix: per earlier attempt of its chain, the repetitions it carries
# (statistics.carry_repetitions): that attempt's run.json, the carried measurement records and
# their raw files, so the verifier recomputes the decision on the union as the engine made it.
CARRIED = "carried/"


def carried_prefix(attempt: int, source_attempt: int) -> str:
    return f"{run_prefix(attempt)}{CARRIED}attempt-{source_attempt}/"


# Beside a carrying run's carried/ folder: the attempt it carries from, its decision's set-aside
# repetitions and every record of its chain by digest (documents.carry.CarriedSource), so the
# verifier recomputes which repetitions had to be carried.
CARRIED_SOURCE = "carried-source.json"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.create_system = UNIX
            info.external_attr = FILE_MODE
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, members[name], compresslevel=COMPRESSION_LEVEL)
    return buffer.getvalue()


def read_zip(data: bytes) -> dict[str, bytes]:
    """Every member by name; refuses duplicates and unsafe names (the same name twice would let
    a reader and the verifier see different files)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise BundleFormatError(f"not a zip file: {error}") from error
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise BundleFormatError(f"{len(infos):,} members; at most {MAX_MEMBERS:,}")
        declared = sum(info.file_size for info in infos)
        if declared > MAX_BUNDLE_BYTES:
            raise BundleFormatError(
                f"its members unpack to {declared:,} bytes; at most {MAX_BUNDLE_BYTES:,}"
            )
        members: dict[str, bytes] = {}
        for info in infos:
            if info.filename in members:
                raise BundleFormatError(f"member {info.filename}: present twice")
            if info.filename.startswith("/") or ".." in info.filename.split("/"):
                raise BundleFormatError(f"member {info.filename}: unsafe name")
            try:
                members[info.filename] = archive.read(info)
            except (zipfile.BadZipFile, OSError) as error:
                raise BundleFormatError(f"member {info.filename}: unreadable ({error})") from error
    return members


def load_json_member(members: dict[str, bytes], name: str) -> Any:
    """The member's JSON, of whatever shape the bundle holds: callers read the shape they
    expect, and verify_bundle reports a member of another shape as a problem."""
    if name not in members:
        raise BundleFormatError(f"member {name}: missing")
    try:
        return json.loads(members[name])
    except (ValueError, UnicodeDecodeError) as error:
        raise BundleFormatError(f"member {name}: not JSON ({error})") from error
