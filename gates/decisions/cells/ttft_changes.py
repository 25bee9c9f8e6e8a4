"""A replayed trace's measured TTFT change on each offload arm (its TTFT statistic over a
baseline arm's, the ratio the G3 TTFT clauses judge, on the statistic each judges) against the
planner's band for it (gates.planner.replay_band, from the model's runs paired by seed and
clock): within, below or above. Advisory, never a verdict: the band is a model's run of the
replay, not a bar either party signed. Pure: the context's bands, the spec's arms and clauses
and the measurements in, rows out.
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
# (offload role, baseline role, the TTFT metrics judged on the pair)
ComparedPair = tuple[str, str, tuple[str, ...]]
P50 = "ttft_p50"  # the statistic whose change band every context with change bands carries


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
    """One row per offload-kind arm, baseline arm, TTFT statistic and tier whose band carries
    the change: the resident arm always (on the statistics its TTFT clauses judge, TTFT p50 when
    none does), the recompute arm on those a TTFT clause comparing the two judges; a note per
    row outside its band. A context from before the other statistics' bands gives the p50 row
    and says so; no rows (None) when no tier carries a change (a context from before them)."""
    if not any("changes" in band for band in bands):
        return None, []
    rows, notes = [], []
    for band in sorted(bands, key=lambda band: band["tier"]):
        if "changes" not in band:
            continue  # no band at this tier: its p50 row says why
        for arm, baseline, judged in compared(arms, clauses):
            for row in _pair_rows(band, arm, baseline, arms[baseline], judged, items):
                rows.append(row)
                if row.get("position") in ("below", "above"):
                    name = f"{CHECK} {arm}/{baseline} {row['metric']} c={band['tier']}"
                    notes.append(f"{name}: {row['cause']}")
    return rows, notes


def _pair_rows(
    band: TtftBandContext,
    arm: str,
    baseline: str,
    kind: str,
    judged: tuple[str, ...],
    items: Sequence[Measurement],
) -> list[G3TtftChangeRow]:
    if "metric_changes" in band:
        return [
            change_row(band, arm, baseline, kind, measured_ratios(items, arm, baseline, band, m), m)
            for m in judged
        ]
    ratios = measured_ratios(items, arm, baseline, band, P50)
    row = change_row(band, arm, baseline, kind, ratios, P50)
    unpredicted = [statistic_words(metric) for metric in judged if metric != P50]
    if unpredicted:
        row["cause"] += (
            f"; a TTFT clause judges {' and '.join(unpredicted)}, whose change band was not "
            "predicted (the planner's context predates those bands), so this row is TTFT p50's"
        )
    return [row]


def measured_ratios(
    items: Sequence[Measurement], arm: str, baseline: str, band: TtftBandContext, metric: str
) -> list[float]:
    """The paired ratios of `metric` at the band's tier, by kept repetition."""
    values: dict[str, dict[int, float]] = defaultdict(dict)
    for item in items:
        value = finite_float(metric_value(item.metrics, metric))
        if item.tier == band["tier"] and value is not None and value > 0:
            values[item.arm][item.repetition] = value
    return paired_ratios(values.get(arm, {}), values.get(baseline, {}))


def compared(arms: dict[str, str], clauses: Sequence[Clause]) -> list[ComparedPair]:
    """(offload role, baseline role, TTFT metrics judged): every resident-kind arm (TTFT p50
    when no TTFT clause sets it against the offload arm), and a recompute-kind arm a TTFT clause
    sets against the offload arm (either way round), each on its clauses' metrics."""
    judged: dict[frozenset[str], set[str]] = defaultdict(set)
    for clause in clauses:
        if clause.metric.startswith("ttft"):
            judged[frozenset((clause.a, clause.b))].add(clause.metric)
    pairs = []
    for arm in sorted(role for role, kind in arms.items() if kind == "offload"):
        for baseline, kind in sorted(arms.items()):
            metrics = judged.get(frozenset((arm, baseline)))
            if kind == "resident" or (kind == "recompute" and metrics):
                pairs.append((arm, baseline, tuple(sorted(metrics or {P50}, key=_statistic_order))))
    return pairs


def _statistic_order(metric: str) -> tuple[int, str]:
    return (0 if metric == P50 else 1, metric)


def change_bands(band: TtftBandContext, metric: str) -> dict[str, list[float]]:
    """The band's change bands of `metric` ("offload/resident" -> [low, high]), {} when none."""
    if metric == P50:
        return band.get("changes", {})
    return band.get("metric_changes", {}).get(metric, {})


def statistic_words(metric: str) -> str:
    """The metric in words: ttft_p99 is "TTFT p99"."""
    return metric.replace("ttft_", "TTFT ", 1)


def paired_ratios(arm: dict[int, float], baseline: dict[int, float]) -> list[float]:
    """Each kept repetition's arm value over the baseline's of the same repetition, by
    repetition (the pairing the clauses use)."""
    return [arm[rep] / baseline[rep] for rep in sorted(arm.keys() & baseline.keys())]


def change_words(ratio: float) -> str:
    return f"{ratio:.3f} ({(ratio - 1) * 100:+.1f} %)"


def change_row(
    band: TtftBandContext,
    arm: str,
    baseline: str,
    kind: str,
    ratios: list[float],
    metric: str = P50,
) -> G3TtftChangeRow:
    """The row of one offload arm against one baseline on one TTFT statistic at one tier
    (within: `pass`; outside, no band or nothing paired: `inconclusive`, which the gate's
    verdict never reads)."""
    tier, words = band["tier"], statistic_words(metric)
    row: G3TtftChangeRow = {
        "check": CHECK,
        "arm": arm,
        "baseline": baseline,
        "tier": tier,
        "metric": metric,
        "verdict": "inconclusive",
        "cause": "",
        "advisory": True,
        "ratios": ratios,
    }
    ends = change_bands(band, metric).get(f"offload/{kind}")
    if ends is None:
        row["cause"] = f"no {words} change band from the planner for offload/{kind} at c={tier}"
        return row
    low, high = ends
    row["band_low"], row["band_high"] = low, high
    row["expected"] = f"{change_words(low)} to {change_words(high)}"
    if not ratios:
        row["cause"] = f"no kept repetition measured {words} on both {arm} and {baseline}"
        return row
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))  # the clauses' geometric mean
    position: BandPosition = "below" if mean < low else "above" if mean > high else "within"
    verdict: RowVerdict = "pass" if position == "within" else "inconclusive"
    row["measured_ratio"], row["position"], row["verdict"] = mean, position, verdict
    row["observed"] = f"{change_words(mean)} ({position})"
    row["cause"] = (
        f"{words} {arm} / {baseline} {change_words(mean)}, the geometric mean over "
        f"{len(ratios)} paired kept repetition(s), is {position} the planner's band "
        f"{change_words(low)} to {change_words(high)} at c={tier}"
    ) + ("" if position == "within" else MODEL_ERROR)
    return row
