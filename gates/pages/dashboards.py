"""The figure panels of the gate and run pages: reads decisions and measurements, picks what to
plot, and hands plain data to gates.charts (g2, g3, the per-request figures, the TTFT band).
Reads models only; no services, views or HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gates.charts import band, g2, g3, requests
from gates.charts.style import metric_axis_title
from gates.decisions.numbers import metric_value
from gates.models import Decision, Gate, Run
from gates.specs.schema import METRICS

FOREST_CAPTION = (
    "Each marker is the measured effect with its confidence interval; the black tick is the "
    "agreed bar and the shaded side meets it. A clause passes when its whole interval lies on "
    "the shaded side, fails when it lies wholly outside, and is inconclusive when it straddles "
    "the bar. Exact numbers are in the table below."
)
MEASUREMENTS_CAPTION = (
    "Every arm's value in every repetition, per concurrency tier (log scale). Lines that wander "
    "show drift; scatter between repetitions is the noise the intervals account for."
)
NOISE_CAPTION = (
    "Two identical runs (A/A) per repetition. Right: how far A is from B in each repetition, and "
    "the interval over all of them; it must lie inside the shaded noise floor."
)
REQUESTS_TTFT_CAPTION = (
    "Every measured request's TTFT against when it was sent, each arm in its colour, the "
    "repetitions together. A step or a slow start (the caches warming) shows here before it "
    "moves the percentiles."
)
REQUESTS_ECDF_CAPTION = (
    "The share of requests at or under each TTFT, per arm: the curve further left is faster; "
    "where two curves cross, one arm wins the median and the other the tail."
)
ARRIVAL_CAPTION = (
    "How late (above 0) or early each request left against the replay's schedule. The replay "
    "is faithful when the p99 of the error's size stays inside the dashed bar."
)
HIT_CAPTION = (
    "Share of prefix-cache lookups served from the offload tier during the hit-rate run; it "
    "must reach the dashed floor, or the offload tier was not exercised."
)


@dataclass(frozen=True)
class NumbersTable:
    """A figure's numbers as a table beside it, for screen readers and exact reading."""

    headers: list[str]
    rows: list[list[Any]]


@dataclass(frozen=True)
class Panel:
    """One figure on a page: `key` is the id of its json_script element."""

    key: str
    title: str
    caption: str
    figure: dict[str, Any]
    table: NumbersTable | None = None


@dataclass(frozen=True)
class GateDashboard:
    """Figures that explain the verdict (above the clause table) and the evidence (below it)."""

    verdict: list[Panel] = field(default_factory=list)
    evidence: list[Panel] = field(default_factory=list)

    @property
    def has_figures(self) -> bool:
        return bool(self.verdict or self.evidence)


def gate_dashboard(gate: Gate) -> GateDashboard:
    """The figures of the gate's latest engine decision: G3 and G2 have some, G1 and G4 none."""
    decision = gate.decisions.filter(kind=Decision.Kind.ENGINE).first()
    return decision_dashboard(decision) if decision is not None else GateDashboard()


def decision_dashboard(decision: Decision) -> GateDashboard:
    """The figures of one decision (the gate report's): none for a waiver or a stop."""
    if decision.kind != Decision.Kind.ENGINE or not isinstance(decision.result, Mapping):
        return GateDashboard()
    if decision.gate.kind == Gate.Kind.G3:
        return _g3_dashboard(decision)
    if decision.gate.kind == Gate.Kind.G2:
        return GateDashboard(verdict=_g2_panels(decision.result))
    return GateDashboard()


def run_panels(run: Run) -> list[Panel]:
    """The run's measurements per arm and repetition, once it has any."""
    rows = measurement_rows(run)
    if not rows:
        return []
    metrics = chart_metrics(run.spec.document)
    figure = g3.measurements_figure(rows, metrics)
    table = measurement_table(rows, metrics)
    title = "Measurements so far"
    measured = Panel("figure-run-measurements", title, MEASUREMENTS_CAPTION, figure, table)
    return [measured, *request_panels(rows)]


def request_panels(rows: list[dict[str, Any]]) -> list[Panel]:
    """Per tier, the per-request figures of the arms that kept per-request records: TTFT by
    send time and its distribution, and a replay's arrival-time error. From the measurements
    already read, never from the raw files."""
    panels = []
    bar_ms = _arrival_bar_ms(rows)
    for tier in requests.requests_by_tier(rows):
        if not any(arm.has_ttft for arm in tier.arms):
            continue
        key, where = f"figure-requests-c{tier.tier}", f"c={tier.tier}"
        table = _requests_table(tier)
        panels += [
            Panel(
                f"{key}-ttft",
                f"TTFT by send time, {where}",
                REQUESTS_TTFT_CAPTION,
                requests.ttft_by_send_time_figure(tier),
                table,
            ),
            Panel(
                f"{key}-ecdf",
                f"TTFT distribution, {where}",
                REQUESTS_ECDF_CAPTION,
                requests.ttft_ecdf_figure(tier),
                table,
            ),
        ]
        if any(arm.has_arrival for arm in tier.arms):
            figure = requests.arrival_error_figure(tier, bar_ms)
            title = f"Arrival-time error of the replay, {where}"
            panels.append(Panel(f"{key}-arrival", title, ARRIVAL_CAPTION, figure, table))
    return panels


def _requests_table(tier: requests.TierRequests) -> NumbersTable:
    """Per arm: how many requests, TTFT p50 / p99 / max and the arrival error's size at p99
    (nearest rank, as the fidelity check reads it); a dash where the arm kept none."""
    headers = ["Arm", "Requests", "TTFT p50, ms", "TTFT p99, ms", "TTFT max, ms"]
    headers.append("Arrival error p99 (measured requests), ms")
    lines = []
    for arm in tier.arms:
        ttfts = [value for value in arm.ttft_ms if value is not None]
        errors = [
            abs(sent - at) * 1000.0
            for at, sent in zip(arm.send_at_s, arm.sent_s, strict=True)
            if at is not None and sent is not None
        ]
        line: list[Any] = [arm.arm, len(arm.ttft_ms) or None, _rank(ttfts, 50)]
        lines.append([*line, _rank(ttfts, 99), max(ttfts, default=None), _rank(errors, 99)])
    return NumbersTable(headers, lines)


def _rank(values: list[float], percent: float) -> float | None:
    """Nearest rank, as the replay's fidelity check and the characterisation read it."""
    if not values:
        return None
    return float(np.percentile(values, percent, method="inverted_cdf"))


def _arrival_bar_ms(rows: list[dict[str, Any]]) -> float | None:
    """The fidelity bar the replay was held to, as its check recorded it."""
    for row in rows:
        replay = (row.get("metrics") or {}).get("replay")
        fidelity = replay.get("fidelity") if isinstance(replay, Mapping) else None
        bar = fidelity.get("arrival_bar_ms") if isinstance(fidelity, Mapping) else None
        if isinstance(bar, int | float) and not isinstance(bar, bool):
            return float(bar)
    return None


def measurement_table(rows: list[dict[str, Any]], metrics: list[str]) -> NumbersTable:
    """One line per arm, tier and repetition, with the plotted metrics."""
    headers = ["Repetition", "Tier", "Arm"] + [metric_axis_title(name) for name in metrics]
    lines = [
        [row["repetition"], row["tier"], row["arm"]]
        + [metric_value(row["metrics"], name) for name in metrics]
        for row in rows
    ]
    return NumbersTable(headers, lines)


def _numbers_of(row: Mapping[str, Any]) -> NumbersTable:
    """The numeric fields of a check row (a G2 panel's numbers)."""
    pairs = [(k, v) for k, v in row.items() if isinstance(v, (int, float)) and k != "ok"]
    return NumbersTable(["Quantity", "Value"], [[k.replace("_", " "), v] for k, v in pairs])


def measurement_rows(run: Run) -> list[dict[str, Any]]:
    fields = ("arm", "tier", "repetition", "metrics")
    return list(run.measurements.order_by("repetition", "tier", "arm").values(*fields))


def chart_metrics(spec: Any) -> list[str]:
    """What to plot for a run of this spec: its G3 clause metrics, or its G2 noise metric,
    topped up with TTFT p50 and output throughput to two at least."""
    document = spec if isinstance(spec, Mapping) else {}
    wanted = [clause.get("metric") for clause in _mappings(document.get("clauses"))]
    wanted += [noise.get("metric") for noise in _mappings([document.get("noise_floor")])]
    found = [name for name in dict.fromkeys(wanted) if isinstance(name, str) and name in METRICS]
    topped = found + [name for name in g3.DEFAULT_METRICS if name not in found]
    return topped[: max(len(found), 2)][: g3.MAX_PLOTTED_METRICS]


def _g3_dashboard(decision: Decision) -> GateDashboard:
    forest = Panel(
        "figure-forest",
        "Each clause against its bar",
        FOREST_CAPTION,
        g3.forest_figure(decision.result),
    )
    run = decision.runs.order_by("-attempt").first()
    rows = measurement_rows(run) if run is not None else []
    if not rows:
        return GateDashboard(verdict=[forest])
    metrics = chart_metrics(decision.spec.document)
    figure = g3.measurements_figure(rows, metrics)
    title = f"Measurements of run #{run.attempt}"
    table = measurement_table(rows, metrics)
    measured = Panel("figure-measurements", title, MEASUREMENTS_CAPTION, figure, table)
    return GateDashboard(verdict=[forest], evidence=[measured])


def _g2_panels(result: Mapping[str, Any]) -> list[Panel]:
    rows = {row.get("check"): row for row in _mappings(result.get("clauses"))}
    panels = []
    if "noise_floor" in rows:
        figure = g2.noise_floor_figure(rows["noise_floor"])
        table = _numbers_of(rows["noise_floor"])
        panels.append(Panel("figure-noise-floor", "A/A noise floor", NOISE_CAPTION, figure, table))
    if "offload_hit" in rows:
        figure = g2.hit_rate_figure(rows["offload_hit"])
        table = _numbers_of(rows["offload_hit"])
        panels.append(Panel("figure-hit-rate", "Offload tier hit rate", HIT_CAPTION, figure, table))
    return panels


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def predicted_ttft_figure(predicted: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A G3 run's predicted band per tier with what the run measured as points
    (gates.selectors.run_predicted_ttft's rows); None until there is a band."""
    if not predicted or predicted.get("state") != "predicted" or not predicted.get("tiers"):
        return None
    rows = predicted["tiers"]
    tiers = [
        {"concurrency": row["concurrency"], "low": row["band"][0], "high": row["band"][1]}
        for row in rows
    ]
    measured = {row["concurrency"]: row["measured"] for row in rows}
    return band.ttft_band_figure(tiers, measured, "measured in this run")
