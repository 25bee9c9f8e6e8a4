"""The predicted TTFT p50 change with offload against resident, per concurrency tier, as a filled
range per tier around the 0 % line, and a run's measured change as points where there is one.
Pure: the band's tiers (fractions) in, a Plotly figure dict out; no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from gates import figures
from gates.charts.style import (
    ARM_COLORS,
    BAR_COLOR,
    empty_figure,
    finish_figure,
    integer_or_none,
    text_of,
)
from gates.decisions.numbers import finite_float

BAND_COLOR = "#9ec5f8"  # light, so the measured points and the 0 % line read on top of it
MEASURED_COLOR = ARM_COLORS[1]
HEIGHT_PX = 320


def ttft_band_figure(
    tiers: Sequence[Mapping[str, Any]],
    measured: Mapping[int, float | None] | None = None,
    measured_name: str = "measured",
) -> dict[str, Any]:
    """One column per tier: the predicted band (`low` to `high`, fractions of the resident
    TTFT p50; negative is faster with offload) as a floating bar, and a measured change per
    tier as a point. Tiers without both ends are left out."""
    rows = sorted(
        (row for row in (_tier(item) for item in tiers) if row is not None),
        key=lambda row: row[0],
    )
    if not rows:
        return empty_figure("No tier of the band is computed yet.")
    labels = [f"c={concurrency}" for concurrency, _, _ in rows]
    figure = go.Figure()
    figure.add_trace(
        go.Bar(
            x=labels,
            base=[low * 100 for _, low, _ in rows],
            y=[(high - low) * 100 for _, low, high in rows],
            marker={"color": BAND_COLOR, "line": {"color": ARM_COLORS[0], "width": 1}},
            width=0.5,
            name="predicted band",
            hovertext=[
                f"c={c}: predicted {figures.change(low)} to {figures.change(high)}"
                for c, low, high in rows
            ],
            hoverinfo="text",
        )
    )
    points = _measured_points(rows, measured or {})
    if points:
        figure.add_trace(
            go.Scatter(
                x=[f"c={c}" for c, _ in points],
                y=[value * 100 for _, value in points],
                mode="markers",
                marker={"color": MEASURED_COLOR, "symbol": "diamond", "size": 12},
                name=text_of(measured_name),
                hovertext=[
                    f"c={c}: {text_of(measured_name)} {figures.change(v)}" for c, v in points
                ],
                hoverinfo="text",
            )
        )
    figure.add_hline(y=0, line_color=BAR_COLOR, line_width=1.5)
    figure.update_xaxes(title="concurrency tier", type="category")
    # Short, so it fits beside a 190 px plot; the section's text says negative is faster.
    figure.update_yaxes(title="TTFT p50 change", ticksuffix=" %", zeroline=False)
    return finish_figure(figure, HEIGHT_PX)


def _tier(item: Mapping[str, Any]) -> tuple[int, float, float] | None:
    concurrency = integer_or_none(item.get("concurrency"))
    low, high = finite_float(item.get("low")), finite_float(item.get("high"))
    if concurrency is None or low is None or high is None:
        return None
    return concurrency, min(low, high), max(low, high)


def _measured_points(
    rows: list[tuple[int, float, float]], measured: Mapping[int, float | None]
) -> list[tuple[int, float]]:
    points = []
    for concurrency, _, _ in rows:
        value = finite_float(measured.get(concurrency))
        if value is not None:
            points.append((concurrency, value))
    return points
