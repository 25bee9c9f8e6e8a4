"""Two decided runs side by side, cell by cell: each run's estimate and the change between them
with its confidence interval (gates.decisions.statistics.change), and whether that change is
more than run-to-run noise. Runs that measured different things are said to be so, not compared.
Pure: run records in, a typed comparison out; no Django, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gates.decisions.statistics.change import METHOD, Change, welch_change
from gates.decisions.units import metric_unit
from gates.figures import finite
from gates.history.series import clause_slug, clause_words
from gates.specs.schema import METRICS

DEFAULT_CONFIDENCE = 0.90


@dataclass(frozen=True)
class RunRecord:
    """A run and its latest engine decision, as the comparison reads it."""

    run_id: int
    attempt: int
    gate_id: int
    gate_kind: str
    engagement_id: int
    engagement: str
    spec_version: int
    spec: Mapping[str, Any]
    decision_id: int | None
    verdict: str | None
    cells: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Side:
    estimate: float | None
    low: float | None
    high: float | None
    verdict: str
    repetitions: int


@dataclass(frozen=True)
class ArmChange:
    """One arm's own metric in both runs (the geometric mean of its repetitions) and the change
    between them: whether a moved ratio came from this arm or from the other."""

    arm: str
    metric: str
    tier: Any
    unit: str
    before: float | None
    after: float | None
    change: Change | None
    reading: str  # better | worse | no distinguishable change | too few repetitions


@dataclass(frozen=True)
class CellChange:
    key: str
    title: str
    unit: str
    before: Side
    after: Side
    change: Change | None
    reading: str  # better | worse | no distinguishable change | too few repetitions
    arms: list[ArmChange] = field(default_factory=list)


@dataclass(frozen=True)
class Comparison:
    before: RunRecord
    after: RunRecord
    comparable: bool
    reasons: list[str]  # why the runs are not compared (empty when they are)
    notes: list[str]  # what a reader should know about compared runs
    confidence: float
    method: str = METHOD
    rows: list[CellChange] = field(default_factory=list)

    def arm_rows(self) -> list[ArmChange]:
        """Each arm's metric at each tier once (two clauses over one baseline share its row)."""
        seen: dict[tuple[str, str, str], ArmChange] = {}
        for row in self.rows:
            for arm in row.arms:
                seen.setdefault((arm.metric, str(arm.tier), arm.arm), arm)
        return list(seen.values())


def compare_runs(before: RunRecord, after: RunRecord) -> Comparison:
    """`after` against `before`, cell by cell where both decided the same cell."""
    confidence = finite((after.spec or {}).get("confidence")) or DEFAULT_CONFIDENCE
    reasons = incomparable_reasons(before, after)
    if reasons:
        return Comparison(before, after, False, reasons, [], confidence)
    earlier = {_key(cell): cell for cell in before.cells}
    rows = [
        _cell_change(earlier[_key(cell)], cell, confidence)
        for cell in after.cells
        if _key(cell) in earlier
    ]
    return Comparison(before, after, True, [], _notes(before, after), confidence, rows=rows)


def incomparable_reasons(before: RunRecord, after: RunRecord) -> list[str]:
    if before.gate_kind != after.gate_kind:
        return [
            f"run #{before.attempt} is a {before.gate_kind} run and run #{after.attempt} a "
            f"{after.gate_kind} run: they measure different things"
        ]
    if before.gate_kind != "G3":
        return [f"only G3 runs have repetitions to compare; these are {before.gate_kind} runs"]
    reasons = [
        f"run #{record.attempt} has no decision yet"
        for record in (before, after)
        if record.decision_id is None
    ]
    differing = workload_differences(before.spec, after.spec)
    if differing:
        reasons.append(
            f"the workloads differ ({', '.join(differing)}): a change would mix "
            "the product with the load"
        )
    return reasons


def workload_differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The workload fields on which two specs differ, by name."""
    a, b = (spec.get("workload") or {} for spec in (before, after))
    return [f"workload.{name}" for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]


def _notes(before: RunRecord, after: RunRecord) -> list[str]:
    notes = []
    if before.engagement_id != after.engagement_id:
        notes.append(
            f"the runs belong to two engagements ({before.engagement}; "
            f"{after.engagement}) with the same workload"
        )
    if before.gate_id == after.gate_id and before.spec_version != after.spec_version:
        notes.append(
            f"spec v{before.spec_version} and v{after.spec_version} share the workload; "
            "their bars may differ"
        )
    return notes


def _key(cell: Mapping[str, Any]) -> str:
    return f"{clause_slug(cell)}@c={cell.get('tier')}"


def _cell_change(
    before: Mapping[str, Any], after: Mapping[str, Any], confidence: float
) -> CellChange:
    change = welch_change(_log_ratios(before), _log_ratios(after), confidence)
    return CellChange(
        key=_key(after),
        title=f"{clause_words(after)}, c={after.get('tier')}",
        unit={"reduction": "%", "gain": "%", "ratio": "x"}.get(str(after.get("change")), ""),
        before=_side(before),
        after=_side(after),
        change=change,
        reading=_reading(change, str(after.get("change") or "")),
        arms=arm_changes(before, after, confidence),
    )


def arm_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], confidence: float
) -> list[ArmChange]:
    """Each compared arm's raw metric in both runs: the ratio's numerator and its denominator,
    each with its own Welch interval on the runs' mean log values."""
    metric = str(after.get("metric") or "")
    higher_is_better = METRICS[metric][2] == "higher" if metric in METRICS else None
    names = str(after.get("compare") or "").split("/")
    if len(names) != 2:
        return []
    found = []
    for side, arm in zip(("a", "b"), names, strict=True):
        logs_before, logs_after = _arm_logs(before, side), _arm_logs(after, side)
        change = welch_change(logs_before, logs_after, confidence)
        found.append(
            ArmChange(
                arm=arm,
                metric=metric,
                tier=after.get("tier"),
                unit=metric_unit(metric),
                before=_geometric_mean(logs_before),
                after=_geometric_mean(logs_after),
                change=change,
                reading=_arm_reading(change, higher_is_better),
            )
        )
    return found


def _arm_logs(cell: Mapping[str, Any], side: str) -> list[float]:
    """The log of one arm's value in each repetition (a value that is not positive has none)."""
    values = (finite(pair.get(side)) for pair in cell.get("pairs") or [])
    return [math.log(value) for value in values if value is not None and value > 0]


def _geometric_mean(logs: Sequence[float]) -> float | None:
    return math.exp(sum(logs) / len(logs)) if logs else None


def _arm_reading(change: Change | None, higher_is_better: bool | None) -> str:
    if change is None:
        return "too few repetitions"
    if not change.distinguishable or higher_is_better is None:
        return "no distinguishable change" if not change.distinguishable else "changed"
    return "better" if (change.low > 0) == higher_is_better else "worse"


def _log_ratios(cell: Mapping[str, Any]) -> list[float]:
    pairs = cell.get("pairs") or []
    return [value for pair in pairs if (value := finite(pair.get("log_ratio"))) is not None]


def _side(cell: Mapping[str, Any]) -> Side:
    return Side(
        estimate=finite(cell.get("estimate")),
        low=finite(cell.get("low")),
        high=finite(cell.get("high")),
        verdict=str(cell.get("verdict") or "no verdict"),
        repetitions=len(_log_ratios(cell)),
    )


def _reading(change: Change | None, kind: str) -> str:
    """Better or worse for the product, in the clause's own direction: a reduction wants the
    ratio lower (offload's TTFT under baseline's), a gain or a ratio wants it higher."""
    if change is None:
        return "too few repetitions"
    if not change.distinguishable:
        return "no distinguishable change"
    lower = change.high < 0
    return "better" if lower == (kind == "reduction") else "worse"
