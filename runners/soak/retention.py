"""Retention of a soak's raw files, the rule: which stored windows keep them once the evidence is
sealed (the telling ones and every Nth), and the dropped windows as seq ranges. The janitor
(gates/services/soak/retention.py) applies it; the verifier reads the ranges back.

Pure: plain data in, plain data out; imports nothing from gates, nothing of Django.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runners.soak import collector

# A window's raw file as stored (collector.window_folder + its name).
RAW_FILE = re.compile(r"^soak/w(\d{6})/(.+)$")


@dataclass(frozen=True)
class WindowFlags:
    """What makes one stored window telling on its own (its sample says so)."""

    seq: int
    crashed: bool = False
    failed: bool = False
    noted: bool = False


def window_flags(seq: int, metrics: Mapping[str, Any] | None) -> WindowFlags:
    """A window's flags from its stored sample's metrics (SoakSample.metrics)."""
    metrics = metrics or {}
    health = metrics.get("health") or {}
    return WindowFlags(
        seq=seq,
        crashed=bool(metrics.get("crashed")),
        failed=bool(metrics.get("failed")),
        noted=bool(metrics.get("notes") or health.get("notes") or health.get("xid_events")),
    )


def decision_seqs(clauses: Iterable[Mapping[str, Any]]) -> set[int]:
    """The windows the decision points at: every change point, and the hit-rate stop."""
    seqs: set[int] = set()
    for clause in clauses:
        seqs.update(point["seq"] for point in clause.get("change_points") or [])
        if clause.get("stopped_seq") is not None:
            seqs.add(clause["stopped_seq"])
    return seqs


def kept_windows(
    flags: Iterable[WindowFlags], clauses: Iterable[Mapping[str, Any]], every_nth: int
) -> set[int]:
    """The seqs whose raw files stay once the evidence is sealed: the telling windows (crashed,
    failed requests, a note or fault, a change point or the hit-rate stop, the first and the
    last) and the sample, every seq divisible by `every_nth` (by seq, not by position, so a
    gap does not shift it)."""
    rows = sorted(flags, key=lambda row: row.seq)
    if not rows:
        return set()
    pointed = decision_seqs(clauses)
    kept = {rows[0].seq, rows[-1].seq}
    telling = (row.crashed or row.failed or row.noted or row.seq in pointed for row in rows)
    for row, tells in zip(rows, telling, strict=True):
        if tells or row.seq % every_nth == 0:
            kept.add(row.seq)
    return kept


def raw_file_dropped(name: str, dropped: Collection[int]) -> bool:
    """Whether retention drops this stored file: a raw file of a dropped window, never its line
    (tiny, and what the window's stored times are checked against)."""
    found = RAW_FILE.match(name)
    return found is not None and found[2] != collector.LINE_FILE and int(found[1]) in dropped


def seq_ranges(seqs: Iterable[int]) -> list[list[int]]:
    """Sorted seqs as inclusive [first, last] runs: 25,000 dropped windows in a few hundred."""
    ranges: list[list[int]] = []
    for seq in sorted(set(seqs)):
        if ranges and ranges[-1][1] == seq - 1:
            ranges[-1][1] = seq
        else:
            ranges.append([seq, seq])
    return ranges


def ranges_seqs(ranges: Iterable[Iterable[int]]) -> set[int]:
    return {seq for first, last in ranges for seq in range(first, last + 1)}
