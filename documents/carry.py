"""What a G3 attempt carries from an inconclusive one (statistics.carry_repetitions): the one
rule for which repetitions are complete, and the source record the evidence bundle holds so the
offline verifier applies the same rule. Standard library only: the service and the verifier
both import it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict


class SourceRecord(TypedDict):
    """One measurement record of the source attempt's chain, as its digest."""

    attempt: int  # the attempt that measured it (the source itself, or one it carried from)
    repetition: int
    arm: str
    tier: int
    sha256: str  # record_digest of the whole record (metrics, raw file's SHA-256 and all)


class CarriedSource(TypedDict):
    """The attempt a run carries from: its engine decision's repetitions set aside and every
    record it decided on, so the complete set can be recomputed from the bundle alone."""

    attempt: int
    decision: dict[str, Any] | None  # {"id", "verdict", "set_aside": [repetition, ...]}
    records: list[SourceRecord]


def complete_repetitions(
    cells: Iterable[tuple[str, int]],
    records: Iterable[Mapping[str, Any]],
    set_aside: Iterable[int],
) -> set[int]:
    """The repetitions of `records` that measured every cell (arm x tier) and that the
    decision did not set aside: the ones carried into the next attempt."""
    wanted = set(cells)
    measured: dict[int, set[tuple[str, int]]] = {}
    for row in records:
        measured.setdefault(row["repetition"], set()).add((row["arm"], row["tier"]))
    aside = set(set_aside)
    return {rep for rep, found in measured.items() if wanted <= found and rep not in aside}


def spec_cells(document: Mapping[str, Any]) -> set[tuple[str, int]]:
    """Every cell of a G3 spec: each arm at each tier."""
    return {(arm, tier) for arm in document["arms"] for tier in document["tiers"]}


def set_aside_repetitions(result: Mapping[str, Any]) -> list[int]:
    """The repetitions an engine decision's result set aside, in order."""
    return sorted({entry["repetition"] for entry in result.get("set_aside") or []})


def record_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of a measurement record's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def source_record(attempt: int, record: Mapping[str, Any]) -> SourceRecord:
    return {
        "attempt": attempt,
        "repetition": record["repetition"],
        "arm": record["arm"],
        "tier": record["tier"],
        "sha256": record_digest(record),
    }
