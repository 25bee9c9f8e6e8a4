"""Plotly figures of G3's evidence: the forest plot and per-arm measurements (G2's figures are in
g2.py, the shared look in style.py). Pure: plain dicts in, JSON-able figure dicts out; no Django,
no I/O. Every number is checked, so missing or broken values draw as gaps, never as errors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gates import figures
from gates.charts.style import (
    ARM_COLORS,
    BAR_COLOR,
    FRAME_PX,
    PASS_SHADE,
    VERDICT_STYLES,
    dicts_of,
    empty_figure,
    field_of,
    finish_figure,
    gap_between,
    integer_or_none,
    metric_axis_title,
    metric_label,
    show_number,
    span_of,
    text_of,
    verdict_style,
    wrap_text,
)
from gates.decisions.numbers import finite_float, metric_value
from gates.specs.schema import METRICS

TIER_AXIS = {"type": "category", "categoryorder": "array", "autorange": "reversed"}
ARM_ORDER = ("baseline", "offload", "recompute", "aa_a", "aa_b")
CHANGE_UNITS = {"reduction": "%", "gain": "%", "ratio": "x", "floor": "%"}
DEFAULT_METRICS = ("ttft_p50", "output_throughput")
MAX_PLOTTED_METRICS = 4
ROW_PX, PANEL_PX = 34, 86  # a panel's room for its title: two lines when wrapped
TITLE_CHARS = 44


# --- G3: the forest plot ------------------------------------------------------------------


def forest_figure(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """One row per clause x tier: the estimate with its interval, the bar, the cell's verdict.

    One panel per clause, each in the clause's own units (% for reduction and gain, x for
    ratio); the shaded side of the bar is where a clause passes (higher always passes).
    """
    groups = _clause_groups(dicts_of(field_of(result, "clauses")))
    if not groups:
        return empty_figure("This decision has no clause results.")
    height = FRAME_PX + sum(len(cells) for cells in groups) * ROW_PX + len(groups) * PANEL_PX
    figure = make_subplots(
        rows=len(groups),
        cols=1,
        row_heights=[len(cells) for cells in groups],
        vertical_spacing=min(PANEL_PX / (height - FRAME_PX), 0.9 / max(len(groups) - 1, 1)),
        subplot_titles=[_clause_title(cells[0], with_bar=True) for cells in groups],
    )
    # Panel titles state the bar: left-aligned and wrapped, so a narrow screen never cuts off
    # the end of one ("... at least 25 %"), as centred single lines were.
    figure.update_annotations(xref="paper", x=0, xanchor="left", align="left")
    for annotation in figure.layout.annotations:
        annotation.text = _wrapped_title(annotation.text)
    shown: set[str] = set()
    for row, cells in enumerate(groups, start=1):
        _add_clause_panel(figure, row, cells, shown)
    return finish_figure(figure, height)


def clause_title(cell: Mapping[str, Any]) -> str:
    """'TTFT p50 reduction, offload vs baseline': what a clause compares, in words."""
    return _clause_title(cell, with_bar=False)


def cell_label(cell: Mapping[str, Any]) -> str:
    """'TTFT p50 reduction, offload vs baseline, c=16': one row of the forest plot."""
    return f"{clause_title(cell)}, {_tier_label(cell)}"


def _clause_groups(cells: list[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for cell in cells:
        key = tuple(str(cell.get(name)) for name in ("clause", "metric", "compare", "change"))
        groups.setdefault(key, []).append(cell)
    return list(groups.values())


def _add_clause_panel(
    figure: go.Figure, row: int, cells: list[Mapping[str, Any]], shown: set[str]
) -> None:
    labels = [_tier_label(cell) for cell in cells]
    unit = CHANGE_UNITS.get(str(cells[0].get("change")), "")
    for verdict, members in _by_verdict(
        [c for c in cells if finite_float(c.get("estimate")) is not None]
    ):
        figure.add_trace(_estimate_trace(verdict, members, unit, shown), row=row, col=1)
    figure.add_trace(_bar_trace(cells, unit, shown), row=row, col=1)
    unknown = [cell for cell in cells if finite_float(cell.get("estimate")) is None]
    if unknown:
        figure.add_trace(_unknown_trace(unknown), row=row, col=1)
    low, high = span_of([_cell_numbers(cell) for cell in cells])
    threshold = finite_float(cells[0].get("threshold"))
    if threshold is not None and threshold < high:
        figure.add_vrect(x0=max(threshold, low), x1=high, row=row, col=1, **PASS_SHADE)
    suffix = {"%": " %", "x": "x"}.get(unit, "")
    figure.update_xaxes(range=[low, high], ticksuffix=suffix, row=row, col=1)
    figure.update_yaxes(TIER_AXIS, categoryarray=labels, row=row, col=1)


def _estimate_trace(
    verdict: str, cells: list[Mapping[str, Any]], unit: str, shown: set[str]
) -> go.Scatter:
    color, symbol = verdict_style(verdict)
    estimates = [finite_float(cell.get("estimate")) for cell in cells]
    highs = [finite_float(cell.get("high")) for cell in cells]
    lows = [finite_float(cell.get("low")) for cell in cells]
    return go.Scatter(
        x=estimates,
        y=[_tier_label(cell) for cell in cells],
        mode="markers",
        marker={"color": color, "symbol": symbol, "size": 11, "line": {"width": 1, "color": color}},
        error_x={
            "type": "data",
            "symmetric": False,
            "array": [gap_between(e, h) for e, h in zip(estimates, highs, strict=True)],
            "arrayminus": [gap_between(lo, e) for lo, e in zip(lows, estimates, strict=True)],
            "color": color,
            "thickness": 2,
            "width": 7,
        },
        name=verdict,
        legendgroup=verdict,
        legendrank=_rank(verdict),
        showlegend=_first(shown, verdict),
        hovertext=[_cell_hover(cell, unit) for cell in cells],
        hoverinfo="text",
    )


def _bar_trace(cells: list[Mapping[str, Any]], unit: str, shown: set[str]) -> go.Scatter:
    thresholds = [finite_float(cell.get("threshold")) for cell in cells]
    return go.Scatter(
        x=thresholds,
        y=[_tier_label(cell) for cell in cells],
        mode="markers",
        marker={"symbol": "line-ns", "size": 26, "line": {"width": 3, "color": BAR_COLOR}},
        name="bar (at least)",
        legendgroup="bar",
        legendrank=1000,
        showlegend=_first(shown, "bar"),
        hovertext=[f"bar: at least {show_number(t, unit)}" for t in thresholds],
        hoverinfo="text",
    )


def _unknown_trace(cells: list[Mapping[str, Any]]) -> go.Scatter:
    """Cells without an interval: said in words at the bar, not drawn as a number."""
    return go.Scatter(
        x=[finite_float(cell.get("threshold")) or 0.0 for cell in cells],
        y=[_tier_label(cell) for cell in cells],
        mode="text",
        text=["  no estimate yet" for _ in cells],
        textposition="middle right",
        textfont={"color": VERDICT_STYLES["inconclusive"][0]},
        hovertext=[wrap_text(text_of(cell.get("cause")) or "no estimate") for cell in cells],
        hoverinfo="text",
        showlegend=False,
    )


def _cell_hover(cell: Mapping[str, Any], unit: str) -> str:
    estimate, low, high = figures.estimate_interval(
        finite_float(cell.get("estimate")),
        finite_float(cell.get("low")),
        finite_float(cell.get("high")),
        unit,
    )
    interval = f"[{low}, {high}]"
    confidence, n = finite_float(cell.get("confidence_at_look")), finite_float(cell.get("n"))
    where = ""
    if confidence is not None and n is not None:
        where = f"<br>{figures.share(confidence)} interval after {n:g} repetitions"
    verdict = text_of(cell.get("verdict")) or "no verdict"
    cause = wrap_text(text_of(cell.get("cause")))
    return (
        f"<b>{cell_label(cell)}</b><br>{estimate} {interval}{where}"
        f"<br>bar: at least {show_number(finite_float(cell.get('threshold')), unit)}"
        f"<br><b>{verdict}</b>{': ' + cause if cause else ''}"
    )


def _cell_numbers(cell: Mapping[str, Any]) -> list[float | None]:
    return [finite_float(cell.get(key)) for key in ("estimate", "low", "high", "threshold")]


def _wrapped_title(title: str) -> str:
    """A long title on two lines, broken where the bar is stated."""
    if len(title) <= TITLE_CHARS or ": " not in title:
        return title
    what, _, bar = title.rpartition(": ")
    return f"{what}:<br>{bar}"


def _clause_title(cell: Mapping[str, Any], *, with_bar: bool) -> str:
    change = text_of(cell.get("change")) or "change"
    compare = text_of(cell.get("compare"))
    a, _, b = compare.partition("/")
    arms = f", {a} vs {b}" if a and b else (f", {compare}" if compare else "")
    title = f"{metric_label(cell.get('metric'))} {change}{arms}"
    threshold = finite_float(cell.get("threshold"))
    if with_bar and threshold is not None:
        unit = CHANGE_UNITS.get(change, "")
        title += f": at least {threshold:g}{' %' if unit == '%' else unit}"
    return title


def _tier_label(cell: Mapping[str, Any]) -> str:
    tier = cell.get("tier")
    if isinstance(tier, bool) or not isinstance(tier, int | str):
        return "c=?"
    return f"c={text_of(tier)}"


def _by_verdict(cells: list[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for cell in cells:
        grouped.setdefault(text_of(cell.get("verdict")) or "no verdict", []).append(cell)
    return list(grouped.items())


# --- G3 (and any run): measurements per arm and repetition ---------------------------------


def measurements_figure(
    measurements: Sequence[Mapping[str, Any]] | None, metrics: Sequence[str] = DEFAULT_METRICS
) -> dict[str, Any]:
    """Each arm's metric per repetition, one column per tier and one row per metric, so drift
    across repetitions and the noise between them are visible."""
    points = [p for p in (_measurement(item) for item in dicts_of(measurements)) if p]
    names = [m for m in metrics if isinstance(m, str) and m in METRICS][:MAX_PLOTTED_METRICS]
    names = names or list(DEFAULT_METRICS)
    if not points:
        return empty_figure("No measurements yet.")
    tiers = sorted({point["tier"] for point in points})
    arms = sorted({point["arm"] for point in points}, key=_arm_rank)
    figure = make_subplots(
        rows=len(names),
        cols=len(tiers),
        shared_xaxes=True,
        column_titles=[f"concurrency {tier}" for tier in tiers],
        horizontal_spacing=min(0.06, 0.6 / len(tiers)),
        vertical_spacing=min(0.12, 0.6 / len(names)),
    )
    shown: set[str] = set()
    for row, metric in enumerate(names, start=1):
        for col, tier in enumerate(tiers, start=1):
            for arm in arms:
                series = [p for p in points if p["arm"] == arm and p["tier"] == tier]
                if series:
                    trace = _arm_trace(arm, arms.index(arm), metric, series, shown)
                    figure.add_trace(trace, row=row, col=col)
            values = [
                finite_float(metric_value(p["metrics"], metric))
                for p in points
                if p["tier"] == tier
            ]
            positive = [v for v in values if v is not None and v > 0]
            ticks = log_ticks(positive)
            if ticks:
                # The range is set with the ticks: left to autorange, a narrow spread of values
                # (c=2 throughput within 10 %) fell between round ticks and showed no label.
                labels = [_short(t) for t in ticks]
                figure.update_yaxes(
                    tickvals=ticks, ticktext=labels, range=log_range(positive), row=row, col=col
                )
        figure.update_yaxes(title_text=f"{metric_axis_title(metric)} (log)", row=row, col=1)
    # Log scale: recompute can be 10x the other arms, and the engine compares ratios anyway.
    figure.update_yaxes(type="log")
    # Whole repetitions, half a step of room either side: one repetition gets one tick.
    last = max(point["repetition"] for point in points)
    figure.update_xaxes(dtick=1, range=[min(p["repetition"] for p in points) - 0.5, last + 0.5])
    figure.update_xaxes(title_text="repetition", row=len(names))
    return finish_figure(figure, FRAME_PX + 240 * len(names))


def _measurement(item: Mapping[str, Any]) -> dict[str, Any] | None:
    tier, repetition = integer_or_none(item.get("tier")), integer_or_none(item.get("repetition"))
    if tier is None or repetition is None:
        return None
    metrics = item.get("metrics")
    return {
        "arm": text_of(item.get("arm")) or "?",
        "tier": tier,
        "repetition": repetition,
        "metrics": metrics if isinstance(metrics, Mapping) else {},
    }


def _arm_trace(
    arm: str, index: int, metric: str, series: list[dict[str, Any]], shown: set[str]
) -> go.Scatter:
    series = sorted(series, key=lambda point: point["repetition"])
    values = [finite_float(metric_value(point["metrics"], metric)) for point in series]
    unit = metric_axis_title(metric).rpartition(", ")[2]
    color = ARM_COLORS[index % len(ARM_COLORS)]
    return go.Scatter(
        x=[point["repetition"] for point in series],
        y=values,
        mode="lines+markers",
        line={"color": color, "width": 1.5},
        marker={"color": color, "size": 8},
        name=arm,
        legendgroup=arm,
        showlegend=_first(shown, arm),
        hovertext=[
            f"{arm}, concurrency {p['tier']}, repetition {p['repetition']}<br>"
            f"{metric_label(metric)}: {show_number(v, ' ' + unit)}"
            for p, v in zip(series, values, strict=True)
        ],
        hoverinfo="text",
    )


def log_ticks(values: Sequence[float]) -> list[float]:
    """Round ticks for a log axis: 1-2-5 per decade over a wide range, finer steps over a
    narrow one. Plotly's own log ticks label minor ticks with a bare digit ("2", "5")."""
    if not values:
        return []
    smallest, largest = min(values), max(values)
    steps = (1, 2, 5) if largest / smallest >= 4 else (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)
    bottom, top = smallest / 1.5, largest * 1.5
    if not (bottom > 0 and math.isfinite(top)) or top / bottom > 1e12:
        return []  # absurd or beyond float range: let Plotly pick
    low, high = math.floor(math.log10(bottom)), math.ceil(math.log10(top))
    # Parsed, not multiplied: 1e308 * 10 overflows to an error, "1e309" to inf.
    ticks = [float(f"{step}e{power}") for power in range(low, high + 1) for step in steps]
    inside = [t for t in ticks if bottom <= t <= top]
    return inside or [ticks[0]]


def log_range(values: Sequence[float]) -> list[float]:
    """The log axis range (in log10 units) that holds every tick `log_ticks` gives."""
    return [math.log10(min(values) / 1.5), math.log10(max(values) * 1.5)]


def _short(value: float) -> str:
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _arm_rank(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def _rank(verdict: str) -> int:
    """Legend order pass, fail, inconclusive, invalid, whatever order the cells come in."""
    names = list(VERDICT_STYLES)
    return 100 * (names.index(verdict) + 1 if verdict in names else len(names) + 1)


def _first(shown: set[str], key: str) -> bool:
    """Show a legend entry once per figure, however many panels use it."""
    if key in shown:
        return False
    shown.add(key)
    return True
