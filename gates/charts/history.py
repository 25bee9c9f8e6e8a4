"""A cell's history as a Plotly figure: each decided attempt's estimate with its interval over
time, marked by verdict (shape and colour), and the bar as a step line across spec versions.
Pure: a gates.history.series.CellHistory in, a JSON-able figure dict out; no Django, no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go

from gates import figures
from gates.charts.style import (
    BAR_COLOR,
    VERDICT_STYLES,
    empty_figure,
    finish_figure,
    gap_between,
    show_number,
    span_of,
    text_of,
    verdict_style,
)
from gates.history.series import BarStep, CellHistory, HistoryPoint

HEIGHT = 340
VERDICT_ORDER = tuple(VERDICT_STYLES)


def history_figure(cell: CellHistory) -> dict[str, Any]:
    """Estimates over decision time with their intervals, and the bar each version set."""
    if not cell.points:
        return empty_figure("No decision has a number for this clause yet.")
    figure = go.Figure()
    for verdict, points in _by_verdict(cell.points):
        figure.add_trace(_points_trace(verdict, points, cell.unit))
    if cell.bar:
        figure.add_trace(_bar_trace(cell.bar, cell.unit))
    values = [[p.estimate, p.low, p.high, p.threshold] for p in cell.points]
    low, high = span_of(values)
    suffix = {"%": " %", "x": "x"}.get(cell.unit, "")
    figure.update_yaxes(range=[low, high], ticksuffix=suffix, title_text=_axis_title(cell))
    figure.update_xaxes(type="date", title_text="decided (UTC)")
    return finish_figure(figure, HEIGHT)


def plot_time(moment: datetime) -> str:
    """A time as plotly.js reads a date (it ignores zone offsets): UTC, written without one."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def point_hover(point: HistoryPoint, unit: str) -> str:
    """ "Run #3 · spec v2 · 30.25 % (26.50 % to 34.00 %) · bar 25 % · pass", as the pages
    write these numbers (gates.figures)."""
    estimate, low, high = figures.estimate_interval(point.estimate, point.low, point.high, unit)
    interval = f" (interval {low} to {high})" if point.low is not None else " (no interval)"
    run = f"Run #{point.run_attempt}" if point.run_attempt is not None else "No run"
    rehearsal = " · rehearsal" if point.rehearsal else ""
    return (
        f"<b>{run}</b> · spec v{point.spec_version}{rehearsal}<br>{estimate}{interval}"
        f"<br>bar {show_number(point.threshold, unit)} · {text_of(point.verdict)}"
        f"<br>decided {plot_time(point.decided_at)} UTC"
    )


def _by_verdict(points: list[HistoryPoint]) -> list[tuple[str, list[HistoryPoint]]]:
    grouped: dict[str, list[HistoryPoint]] = {}
    for point in points:
        grouped.setdefault(point.verdict, []).append(point)
    rank = {verdict: index for index, verdict in enumerate(VERDICT_ORDER)}
    return sorted(grouped.items(), key=lambda item: rank.get(item[0], len(rank)))


def _points_trace(verdict: str, points: list[HistoryPoint], unit: str) -> go.Scatter:
    color, symbol = verdict_style(verdict)
    estimates = [p.estimate for p in points]
    return go.Scatter(
        x=[plot_time(p.decided_at) for p in points],
        y=estimates,
        mode="markers",
        marker={"color": color, "symbol": symbol, "size": 11, "line": {"width": 1, "color": color}},
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [gap_between(p.estimate, p.high) for p in points],
            "arrayminus": [gap_between(p.low, p.estimate) for p in points],
            "color": color,
            "thickness": 2,
            "width": 6,
        },
        name=text_of(verdict),
        legendgroup=text_of(verdict),
        hovertext=[point_hover(p, unit) for p in points],
        hoverinfo="text",
    )


def _bar_trace(steps: list[BarStep], unit: str) -> go.Scatter:
    """One step line: each version's bar from its start, the last held to its end."""
    x = [plot_time(step.start) for step in steps] + [plot_time(steps[-1].end)]
    y = [step.threshold for step in steps] + [steps[-1].threshold]
    hover = [_step_hover(step, unit) for step in steps] + [_step_hover(steps[-1], unit)]
    return go.Scatter(
        x=x,
        y=y,
        mode="lines",
        line={"color": BAR_COLOR, "width": 2, "shape": "hv", "dash": "dash"},
        name="bar",
        legendgroup="bar",
        legendrank=1000,
        hovertext=hover,
        hoverinfo="text",
    )


def _step_hover(step: BarStep, unit: str) -> str:
    state = "in force" if step.in_force else "never signed by both (rehearsal)"
    return f"bar of spec v{step.spec_version}: {show_number(step.threshold, unit)} ({state})"


def _axis_title(cell: CellHistory) -> str:
    if cell.comparison in ("reduction", "gain"):
        return f"{cell.comparison}, %"
    return {"ratio": "ratio, x"}.get(cell.comparison or "", cell.unit or "value")
