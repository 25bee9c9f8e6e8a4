"""A clause's history across decided attempts: per cell (a G3 clause at one tier, or a G2/G4
check with a number), the estimate and its interval per decision over time, and the bar as a
step line, each spec version's bar drawn for the period it was in force.
Pure: decision and version records in, typed series out; no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from gates.decisions.g2 import CHECK_NUMBERS
from gates.decisions.units import clause_comparison, clause_unit
from gates.figures import finite
from gates.specs.words import metric_name


@dataclass(frozen=True)
class DecisionRecord:
    """One engine decision as the history reads it (gates.history.reads builds these)."""

    decision_id: int
    gate_id: int
    gate_kind: str
    engagement_id: int
    engagement: str
    decided_at: datetime
    run_id: int | None
    run_attempt: int | None
    spec_version: int
    rehearsal: bool
    clauses: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class VersionRecord:
    """A gate's spec version and when both parties had signed it (None: never in force)."""

    gate_id: int
    version: int
    in_force_at: datetime | None


@dataclass(frozen=True)
class HistoryPoint:
    decided_at: datetime
    decision_id: int
    run_id: int | None
    run_attempt: int | None
    spec_version: int
    rehearsal: bool
    verdict: str
    estimate: float
    low: float | None
    high: float | None
    threshold: float | None


@dataclass(frozen=True)
class BarStep:
    """The bar one spec version set, from when it came into force until the next one did."""

    spec_version: int
    threshold: float
    start: datetime
    end: datetime
    in_force: bool


@dataclass(frozen=True)
class CellHistory:
    gate_id: int
    gate_kind: str
    engagement_id: int
    engagement: str
    key: str  # the clause slug (the same across tiers and engagements) and the tier
    clause: str
    tier: int | None
    title: str
    unit: str
    comparison: str | None
    points: list[HistoryPoint] = field(default_factory=list)
    bar: list[BarStep] = field(default_factory=list)


def clause_slug(row: Mapping[str, Any]) -> str:
    """ "ttft_p50:offload/baseline:reduction" for a G3 clause, the check's name otherwise: what
    /history/?clause= names, the same in every engagement whose spec has that clause."""
    if row.get("change"):
        return ":".join(str(row.get(name) or "") for name in ("metric", "compare", "change"))
    return str(row.get("check") or row.get("metric") or "")


# What a G2 check's number is, in words (the check's own name says what it tests, not its number).
_G2_WORDS = {
    "health": "seconds until the offload server was healthy",
    "equivalence": "greedy outputs that differ with offload",
    "offload_hit": "external (offload tier) hit rate",
    "noise_floor": "A/A noise floor",
}


def clause_words(row: Mapping[str, Any]) -> str:
    """ "TTFT p50 reduction, offload vs baseline": the clause as a person reads it."""
    check = str(row.get("check") or "")
    if check in _G2_WORDS:
        metric = row.get("metric")
        return f"{_G2_WORDS[check]} ({metric_name(str(metric))})" if metric else _G2_WORDS[check]
    name = metric_name(str(row.get("metric") or check))
    if not row.get("change"):
        return name
    before, _, after = str(row.get("compare") or "").partition("/")
    arms = f", {before} vs {after}" if before and after else ""
    return f"{name} {row['change']}{arms}"


def cell_histories(
    decisions: Iterable[DecisionRecord], versions: Iterable[VersionRecord], now: datetime
) -> list[CellHistory]:
    """Every cell with a number in any decision, its points oldest first and its bar steps;
    cells in the order the gates and their decisions first name them."""
    return with_bars(cell_points(decisions), versions, now)


def cell_points(decisions: Iterable[DecisionRecord]) -> list[CellHistory]:
    """Every cell with a number in any decision and its points, oldest first; no bar yet."""
    ordered = sorted(decisions, key=lambda d: (d.decided_at, d.decision_id))
    cells: dict[tuple[int, str], CellHistory] = {}
    for decision in ordered:
        for row in decision.clauses:
            point = _point(decision, row)
            if point is not None:
                _cell_for(cells, decision, row).points.append(point)
    return list(cells.values())


def with_bars(
    cells: Iterable[CellHistory], versions: Iterable[VersionRecord], now: datetime
) -> list[CellHistory]:
    """The cells with their bar steps, each version's from when it came into force."""
    in_force = _in_force_by_gate(versions)
    return [
        replace(cell, bar=bar_steps(cell.points, in_force.get(cell.gate_id, {}), now))
        for cell in cells
    ]


def _cell_for(
    cells: dict[tuple[int, str], CellHistory], decision: DecisionRecord, row: Mapping[str, Any]
) -> CellHistory:
    tier = row.get("tier")
    tier = tier if isinstance(tier, int) and not isinstance(tier, bool) else None
    slug = clause_slug(row)
    key = f"{slug}@c={tier}" if tier is not None else slug
    if (decision.gate_id, key) not in cells:
        words = clause_words(row)
        cells[(decision.gate_id, key)] = CellHistory(
            gate_id=decision.gate_id,
            gate_kind=decision.gate_kind,
            engagement_id=decision.engagement_id,
            engagement=decision.engagement,
            key=key,
            clause=slug,
            tier=tier,
            title=f"{words}, c={tier}" if tier is not None else words,
            unit=clause_unit(row) or "",
            comparison=clause_comparison(row),
        )
    return cells[(decision.gate_id, key)]


def _point(decision: DecisionRecord, row: Mapping[str, Any]) -> HistoryPoint | None:
    """The row's number: a G3 cell's estimate with its interval, a check's observed value or a
    G2 check's measured number (no interval); None when it has none (a cell before two pairs,
    a yes/no check, a G2 check that observed nothing)."""
    estimate = finite(row.get("estimate"))
    low, high = finite(row.get("low")), finite(row.get("high"))
    if estimate is None:
        estimate, low, high = finite(row.get("observed")), None, None
    value_key, bar_key = _g2_keys(decision, row)
    if estimate is None and value_key:
        estimate = finite(row.get(value_key))
    if estimate is None:
        return None
    threshold = finite(row.get("threshold"))
    for name in ("expected", "limit", bar_key):
        threshold = finite(row.get(name)) if threshold is None and name else threshold
    return HistoryPoint(
        decided_at=decision.decided_at,
        decision_id=decision.decision_id,
        run_id=decision.run_id,
        run_attempt=decision.run_attempt,
        spec_version=decision.spec_version,
        rehearsal=decision.rehearsal,
        verdict=str(row.get("verdict") or "no verdict"),
        estimate=estimate,
        low=low,
        high=high,
        threshold=threshold,
    )


def _g2_keys(decision: DecisionRecord, row: Mapping[str, Any]) -> tuple[str, str]:
    """A G2 check's number and bar keys; empty for every other row."""
    if decision.gate_kind != "G2":
        return "", ""
    return CHECK_NUMBERS.get(str(row.get("check") or ""), ("", ""))


def _in_force_by_gate(versions: Iterable[VersionRecord]) -> dict[int, dict[int, datetime]]:
    found: dict[int, dict[int, datetime]] = {}
    for record in versions:
        if record.in_force_at is not None:
            found.setdefault(record.gate_id, {})[record.version] = record.in_force_at
    return found


def bar_steps(
    points: Sequence[HistoryPoint], in_force: Mapping[int, datetime], now: datetime
) -> list[BarStep]:
    """Each version's bar, as the decisions on it state it, from when the version came into
    force (or, never signed by both, from its first decision: a rehearsal bar) until the next
    version's bar starts; the last runs to `now`."""
    bars: dict[int, tuple[float, datetime]] = {}
    for point in points:
        if point.threshold is None or point.spec_version in bars:
            continue
        start = in_force.get(point.spec_version, point.decided_at)
        bars[point.spec_version] = (point.threshold, min(start, point.decided_at))
    starts = sorted((start, version, threshold) for version, (threshold, start) in bars.items())
    steps = []
    for index, (start, version, threshold) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else max(now, start)
        steps.append(BarStep(version, threshold, start, end, version in in_force))
    return steps


def clause_choices(cells: list[CellHistory]) -> list[tuple[str, str]]:
    """(slug, words) of every clause with a number, in the order first met."""
    found: dict[str, str] = {}
    for cell in cells:
        if cell.tier is None:  # a check: its title is its words
            found.setdefault(cell.clause, cell.title)
            continue
        row = dict(zip(("metric", "compare", "change"), cell.clause.split(":"), strict=False))
        found.setdefault(cell.clause, clause_words(row))
    return list(found.items())
