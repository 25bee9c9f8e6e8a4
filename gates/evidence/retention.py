"""Retention of a soak's raw files, the evidence's side: the server-signed record of the windows
whose raw files were dropped (runners/soak/retention.py says which) that a bundle built after
pruning carries, and the verifier's check of that record.

Pure: plain data in, plain data out; imports no Django (the offline verifier uses it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gates.evidence import layout, statement
from runners.soak.retention import kept_windows, ranges_seqs, raw_file_dropped, window_flags

# A bundle member beside the sealed envelope: its own DSSE envelope, signed by the server when
# the bundle is built, whose one subject is the sealed envelope (so it names the evidence).
RETENTION = layout.RETENTION
RETENTION_PREDICATE_TYPE = "https://tollgate.dev/evidence/retention/v1"
# A run's raw file as a bundle member.
RUN_FILE = re.compile(r"^runs/attempt-(\d+)/files/(.+)$")


def retention_statement(sealed_envelope: bytes, runs: Mapping[int, Mapping[str, Any]]) -> dict:
    """What the server signs for a bundle built after pruning: the sealed envelope it belongs
    to, and per run attempt the policy in force, the windows stored and the dropped ranges."""
    return {
        "_type": statement.STATEMENT_TYPE,
        "subject": [
            {"name": layout.ENVELOPE, "digest": {"sha256": layout.sha256_hex(sealed_envelope)}}
        ],
        "predicateType": RETENTION_PREDICATE_TYPE,
        "predicate": {"runs": {str(attempt): dict(run) for attempt, run in runs.items()}},
    }


@dataclass
class Dropped:
    """What a bundle's retention record lets be missing: per run attempt, the dropped seqs."""

    seqs: dict[int, set[int]]
    policy: dict[int, dict]

    def covers(self, name: str) -> bool:
        """A member the seal lists that retention dropped: a raw file of a dropped window
        (never the window's line, which is always kept)."""
        found = RUN_FILE.match(name)
        return found is not None and raw_file_dropped(found[2], self.seqs.get(int(found[1]), ()))


NOTHING_DROPPED = Dropped({}, {})


def check_retention(members: dict[str, bytes], key: Ed25519PublicKey, report: Any) -> Dropped:
    """The bundle's retention record, checked: signed by the server's key, over this bundle's
    sealed envelope. A record that fails lets nothing be missing."""
    if RETENTION not in members:
        return NOTHING_DROPPED
    try:
        document = layout.load_json_member(members, RETENTION)
        statement.verify_envelope(document, key)
        signed = json.loads(statement.envelope_payload(document)[0])
    except (ValueError, TypeError, AttributeError) as error:
        report.problems.append(f"member {RETENTION}: {error}")
        return NOTHING_DROPPED
    sealed = layout.sha256_hex(members.get(layout.ENVELOPE, b""))
    subject = (signed.get("subject") or [{}])[0]
    if signed.get("predicateType") != RETENTION_PREDICATE_TYPE or subject.get("digest") != {
        "sha256": sealed
    }:
        report.problems.append(f"member {RETENTION}: not a retention record of this evidence")
        return NOTHING_DROPPED
    runs = (signed.get("predicate") or {}).get("runs") or {}
    return Dropped(
        seqs={int(a): ranges_seqs(run.get("dropped") or []) for a, run in runs.items()},
        policy={int(a): run.get("policy") or {} for a, run in runs.items()},
    )


def policy_problems(
    windows: list[dict], decision: dict, dropped: set[int], policy: Mapping[str, Any], where: str
) -> list[str]:
    """A dropped window the policy keeps (a crash, failed requests, a note, a change point, the
    hit-rate stop, first, last, the sample), by the signed samples and decision: retention may
    drop only the windows that tell nothing."""
    flags = [window_flags(row["seq"], row.get("metrics")) for row in windows]
    clauses = (decision.get("result") or {}).get("clauses") or []
    every = policy.get("keep_every_nth_window")
    if not isinstance(every, int) or every < 1:
        return [f"{where}: the retention policy's keep_every_nth_window is {every!r}"]
    wrong = sorted(dropped & kept_windows(flags, clauses, every))
    if not wrong:
        return []
    return [f"{where}: window(s) {wrong[:10]} dropped by retention, but its policy keeps them"]


def dropped_note(attempt: int, dropped: Dropped) -> str | None:
    """What the verifier says of a run's windows taken as recorded, or None when none were."""
    seqs = dropped.seqs.get(attempt)
    if not seqs:
        return None
    policy = json.dumps(dropped.policy.get(attempt) or {}, sort_keys=True)
    return (
        f"run attempt {attempt}: raw files of {len(seqs)} windows dropped by retention (policy "
        f"{policy}): their metrics are taken as recorded"
    )
