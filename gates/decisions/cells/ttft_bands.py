"""A replayed trace's measured TTFT p50 on each offload arm against the planner's predicted band
for its tier (gates.planner.replay_band): within, below or above. Advisory, never a verdict:
the band is a model's run of the replay (simhost's engine on the engagement's deployment), not
a bar either party signed. Pure: the context's bands and the measurements in, rows out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from documents.cell import BandPosition, G3TtftBandRow, RowVerdict, TtftBandContext
from documents.spec import ArmKind
from gates.decisions.numbers import finite_float, is_number, metric_value
from gates.decisions.validity import EvidenceError, Measurement
from gates.specs.schema import ARM_KINDS

CONTEXT_KEY = "replay_ttft_predictions"
_OFFLOAD: ArmKind = "offload"  # the arm kind whose band the rows hold a cell to
MODEL_ERROR = (
    ": a model error, not a tier defect (the band is the planner's run of the replay, not an "
    "agreed bar); never the G3 verdict"
)
# The TTFT changes a tier may carry (offload p50 / baseline p50, simhost.engine.replay_predict)
# under `changes`, and the same for the other TTFT statistics under `metric_changes` by metric.
CHANGES = ("offload/recompute", "offload/resident")
CHANGE_METRICS = ("ttft_mean", "ttft_p90", "ttft_p99")
# Recorded beside each band as the planner said it; shown, never read by the rows.
CARRIED = {"modelled": int, "kept": int, "refused": int, "capped": bool, "assumes": str}


def parse_ttft_band(band: Any, field: str) -> TtftBandContext:
    """One tier as the context carries it: {tier, arms: {kind: [low_ms, high_ms]}, ...} or
    {tier, missing}."""
    tier = band.get("tier") if isinstance(band, dict) else None
    if not isinstance(tier, int) or isinstance(tier, bool):
        raise EvidenceError(f"{field}.tier", "must be the replayed cell's concurrency tier")
    if isinstance(band.get("missing"), str):
        return {"tier": tier, "missing": band["missing"]}
    arms = band.get("arms")
    if not isinstance(arms, dict) or not arms or not set(arms) <= set(ARM_KINDS):
        raise EvidenceError(
            f"{field}.arms", f"must map arm kinds ({', '.join(ARM_KINDS)}) to bands"
        )
    parsed: TtftBandContext = {"tier": tier, "arms": {}}
    for kind, ends in sorted(arms.items()):
        parsed["arms"][kind] = _ends(ends, f"{field}.arms.{kind}")
    if band.get("changes") is not None:  # a context from before the change bands: no row
        parsed["changes"] = _changes(band["changes"], f"{field}.changes")
    by_metric = band.get("metric_changes")
    if by_metric is not None:  # a context from before them: the p50 row only
        if not isinstance(by_metric, dict) or not set(by_metric) <= set(CHANGE_METRICS):
            raise EvidenceError(
                f"{field}.metric_changes",
                f"must map TTFT metrics ({', '.join(CHANGE_METRICS)}) to change bands",
            )
        parsed["metric_changes"] = {
            metric: _changes(changes, f"{field}.metric_changes.{metric}")
            for metric, changes in sorted(by_metric.items())
        }
    for name, kind_of in CARRIED.items():
        value = band.get(name)
        if isinstance(value, kind_of) and (kind_of is bool or not isinstance(value, bool)):
            parsed[name] = value  # type: ignore[literal-required]
    return parsed


def _changes(changes: Any, field: str) -> dict[str, list[float]]:
    if not isinstance(changes, dict) or not set(changes) <= set(CHANGES):
        raise EvidenceError(field, f"must map TTFT changes ({', '.join(CHANGES)}) to bands")
    return {
        name: _ends(ends, f"{field}.{name}", "[low, high]")
        for name, ends in sorted(changes.items())
    }


def _ends(ends: Any, field: str, shape: str = "[low_ms, high_ms]") -> list[float]:
    ok = isinstance(ends, list) and len(ends) == 2 and all(map(is_number, ends))
    low, high = (finite_float(end) for end in ends) if ok else (None, None)
    if low is None or high is None or not 0 < low <= high:
        raise EvidenceError(field, f"must be {shape}, 0 < low <= high")
    return [low, high]


def parse_g3_ttft_bands(context: Any) -> list[TtftBandContext] | None:
    """The G3 context's `replay_ttft_predictions` (one per tier), None when it has none."""
    bands = context.get(CONTEXT_KEY) if isinstance(context, dict) else None
    if bands is None:
        return None
    field = f"context.{CONTEXT_KEY}"
    if not isinstance(bands, list):
        raise EvidenceError(field, "must be a list of {tier, arms} or {tier, missing}")
    parsed = [parse_ttft_band(band, f"{field}[{i}]") for i, band in enumerate(bands)]
    if len({band["tier"] for band in parsed}) != len(parsed):
        raise EvidenceError(field, "names a tier twice")
    return parsed


def g3_ttft_rows(
    bands: Sequence[TtftBandContext], arms: dict[str, str], items: Sequence[Measurement]
) -> tuple[list[G3TtftBandRow], list[str]]:
    """One row per offload-kind arm and tier with a band: the mean of its kept repetitions'
    TTFT p50 against the offload band; and a note per cell outside it."""
    measured: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    for item in items:
        value = finite_float(metric_value(item.metrics, "ttft_p50"))
        if value is not None:
            measured[(item.arm, item.tier)].append((item.repetition, value))
    rows, notes = [], []
    for band in sorted(bands, key=lambda band: band["tier"]):
        for arm in sorted(role for role, kind in arms.items() if kind == "offload"):
            values = [value for _, value in sorted(measured.get((arm, band["tier"]), []))]
            row = ttft_row(band, arm, values)
            rows.append(row)
            if row.get("position") in ("below", "above"):
                notes.append(f"replay_ttft_band {arm} c={band['tier']}: {row['cause']}")
    return rows, notes


def ttft_row(band: TtftBandContext, arm: str, values: list[float]) -> G3TtftBandRow:
    """The row of one offload arm at one tier (within: `pass`; outside, no band or nothing
    measured: `inconclusive`, which the gate's verdict never reads)."""
    tier = band["tier"]
    row: G3TtftBandRow = {
        "check": "replay_ttft_band",
        "arm": arm,
        "tier": tier,
        "verdict": "inconclusive",
        "cause": "",
        "advisory": True,
        "ttft_p50_ms": values,
    }
    offload = band.get("arms", {}).get(_OFFLOAD)
    if "missing" in band or offload is None:
        why = band.get("missing", "it predicts no offload arm")
        row["cause"] = f"no TTFT band from the planner at c={tier}: {why}"
        return row
    low, high = offload
    row["band_low_ms"], row["band_high_ms"] = low, high
    row["expected"] = f"{low:.1f} to {high:.1f} ms"
    if not values:
        row["cause"] = "TTFT p50 was not observed"
        return row
    mean = sum(values) / len(values)
    position: BandPosition = "below" if mean < low else "above" if mean > high else "within"
    verdict: RowVerdict = "pass" if position == "within" else "inconclusive"
    row["measured_ms"], row["position"], row["verdict"] = mean, position, verdict
    row["observed"] = f"{mean:.1f} ms ({position})"
    row["cause"] = (
        f"mean TTFT p50 {mean:.1f} ms over {len(values)} kept repetition(s) is {position} the "
        f"planner's band {low:.1f} to {high:.1f} ms at c={tier}"
    ) + ("" if position == "within" else MODEL_ERROR)
    return row
