"""A replayed trace's measured TTFT change on each offload arm (its TTFT p50 over a baseline
arm's, the ratio the G3 TTFT clauses judge) against the planner's band for it
(gates.planner.replay_band, from the model's runs paired by seed and clock): within, below or
above. Advisory, never a verdict: the band is a model's run of the replay, not a bar either
party signed. Pure: the context's bands, the spec's arms and clauses and the measurements in,
rows out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from documents.cell import (
    BandPosition,
    G3TtftBandRow,
    G3TtftChangeRow,
    RowVerdict,
    TtftBandContext,
)
from gates.decisions.cells.ttft_bands import MODEL_ERROR, g3_ttft_rows
from gates.decisions.clauses import Clause, G3Terms
from gates.decisions.numbers import finite_float, metric_value
from gates.decisions.validity import Measurement

CHECK = "replay_ttft_change"


def g3_ttft_advisory_rows(
    bands: Sequence[TtftBandContext], parsed: G3Terms, items: Sequence[Measurement]
) -> tuple[list[G3TtftBandRow], list[G3TtftChangeRow] | None, list[str]]:
    """A replayed G3's advisory TTFT rows: each offload cell's p50 against its band
    (cells.ttft_bands), its change against the change band (None: the context has none), and
    the notes of both, p50 rows first."""
    p50_rows, p50_notes = g3_ttft_rows(bands, parsed.arms, items)
    changes, change_notes = g3_ttft_change_rows(bands, parsed.arms, parsed.clauses, items)
    return p50_rows, changes, p50_notes + change_notes


def g3_ttft_change_rows(
    bands: Sequence[TtftBandContext],
    arms: dict[str, str],
    clauses: Sequence[Clause],
    items: Sequence[Measurement],
) -> tuple[list[G3TtftChangeRow] | None, list[str]]:
    """One row per offload-kind arm, baseline arm and tier whose band carries the change: the
    resident arm always, the recompute arm when a TTFT clause compares the two; a note per row
    outside its band. No rows (None) when no tier carries a change (a context from before them)."""
    if not any("changes" in band for band in bands):
        return None, []
    p50s: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for item in items:
        value = finite_float(metric_value(item.metrics, "ttft_p50"))
        if value is not None and value > 0:
            p50s[(item.arm, item.tier)][item.repetition] = value
    rows, notes = [], []
    for band in sorted(bands, key=lambda band: band["tier"]):
        if "changes" not in band:
            continue  # no band at this tier: its p50 row says why
        for arm, baseline in compared(arms, clauses):
            tier = band["tier"]
            ratios = paired_ratios(p50s.get((arm, tier), {}), p50s.get((baseline, tier), {}))
            row = change_row(band, arm, baseline, arms[baseline], ratios)
            rows.append(row)
            if row.get("position") in ("below", "above"):
                notes.append(f"{CHECK} {arm}/{baseline} c={tier}: {row['cause']}")
    return rows, notes


def compared(arms: dict[str, str], clauses: Sequence[Clause]) -> list[tuple[str, str]]:
    """(offload role, baseline role): every resident-kind arm, and a recompute-kind arm a TTFT
    clause sets against the offload arm (either way round)."""
    by_ttft = {
        frozenset((clause.a, clause.b)) for clause in clauses if clause.metric.startswith("ttft")
    }
    pairs = []
    for arm in sorted(role for role, kind in arms.items() if kind == "offload"):
        for baseline, kind in sorted(arms.items()):
            if kind == "resident" or (
                kind == "recompute" and frozenset((arm, baseline)) in by_ttft
            ):
                pairs.append((arm, baseline))
    return pairs


def paired_ratios(arm: dict[int, float], baseline: dict[int, float]) -> list[float]:
    """Each kept repetition's arm p50 over the baseline's of the same repetition, by repetition
    (the pairing the clauses use)."""
    return [arm[rep] / baseline[rep] for rep in sorted(arm.keys() & baseline.keys())]


def change_words(ratio: float) -> str:
    return f"{ratio:.3f} ({(ratio - 1) * 100:+.1f} %)"


def change_row(
    band: TtftBandContext, arm: str, baseline: str, kind: str, ratios: list[float]
) -> G3TtftChangeRow:
    """The row of one offload arm against one baseline at one tier (within: `pass`; outside, no
    band or nothing paired: `inconclusive`, which the gate's verdict never reads)."""
    tier = band["tier"]
    row: G3TtftChangeRow = {
        "check": CHECK,
        "arm": arm,
        "baseline": baseline,
        "tier": tier,
        "verdict": "inconclusive",
        "cause": "",
        "advisory": True,
        "ratios": ratios,
    }
    ends = band.get("changes", {}).get(f"offload/{kind}")
    if ends is None:
        row["cause"] = f"no TTFT change band from the planner for offload/{kind} at c={tier}"
        return row
    low, high = ends
    row["band_low"], row["band_high"] = low, high
    row["expected"] = f"{change_words(low)} to {change_words(high)}"
    if not ratios:
        row["cause"] = f"no kept repetition measured TTFT p50 on both {arm} and {baseline}"
        return row
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))  # the clauses' geometric mean
    position: BandPosition = "below" if mean < low else "above" if mean > high else "within"
    verdict: RowVerdict = "pass" if position == "within" else "inconclusive"
    row["measured_ratio"], row["position"], row["verdict"] = mean, position, verdict
    row["observed"] = f"{change_words(mean)} ({position})"
    row["cause"] = (
        f"TTFT p50 {arm} / {baseline} {change_words(mean)}, the geometric mean over "
        f"{len(ratios)} paired kept repetition(s), is {position} the planner's band "
        f"{change_words(low)} to {change_words(high)} at c={tier}"
    ) + ("" if position == "within" else MODEL_ERROR)
    return row
