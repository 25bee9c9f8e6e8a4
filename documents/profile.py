"""A run's profile snapshot: the profile as the run used it (its name, command templates and
parameters, what the work order reads), and the SHA-256 of its canonical JSON, which run.json
in the evidence carries and carrying compares. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypedDict


class ProfileSnapshot(TypedDict):
    name: str
    commands: dict[str, Any]
    parameters: dict[str, Any]


def profile_snapshot(
    name: str, commands: dict[str, Any], parameters: dict[str, Any]
) -> ProfileSnapshot:
    return {"name": name, "commands": commands, "parameters": parameters}


def profile_digest(snapshot: ProfileSnapshot) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces), as a spec's digest is made."""
    canonical = json.dumps(snapshot, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def short_digest(digest: str) -> str:
    """The form a sentence or a page shows (12 hex digits, as other digests are shown)."""
    return digest[:12]
