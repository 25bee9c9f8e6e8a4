"""Plotly figures of G2's evidence: the A/A noise floor and the offload hit rate, in the look
of style.py. Pure: plain dicts in, JSON-able figure dicts out; no Django, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gates.charts.style import (
    ARM_COLORS,
    BAR_COLOR,
    FLOOR_SHADE,
    FRAME_PX,
    dicts_of,
    empty_figure,
    field_of,
    finish_figure,
    gap_between,
    integer_or_none,
    mapping_or_empty,
    metric_axis_title,
    metric_label,
    show_number,
    span_of,
    text_of,
    verdict_style,
    wrap_text,
)
from gates.decisions.numbers import finite_float


def noise_floor_figure(row: Mapping[str, Any] | None) -> dict[str, Any]:
    """The A/A pairs (two identical runs per repetition) and their difference, with the
    interval of all pairs, against the allowed noise floor (shaded)."""
    pairs = dicts_of(field_of(row, "pairs"))
    if not pairs:
        return empty_figure("No A/A pairs were measured.")
    label = metric_label(field_of(row, "metric") or "ttft_p50")
    figure = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.18,
        subplot_titles=[f"{label} of two identical runs", "difference A vs B, %"],
    )
    reps = [_pair_name(pair, i) for i, pair in enumerate(pairs)]
    for side, name, color in (("a", "run A", ARM_COLORS[0]), ("b", "run B", ARM_COLORS[1])):
        values = [finite_float(pair.get(side)) for pair in pairs]
        figure.add_trace(_side_trace(reps, values, name, color), row=1, col=1)
    differences = [_difference(finite_float(p.get("a")), finite_float(p.get("b"))) for p in pairs]
    figure.add_trace(_difference_trace(differences, reps), row=1, col=2)
    interval = _interval_trace(mapping_or_empty(row))
    band = _floor_band(finite_float(field_of(row, "max_noise_pct")))
    if interval is not None:
        figure.add_trace(interval, row=1, col=2)
    if band is not None:
        figure.add_vrect(x0=band[0], x1=band[1], row=1, col=2, **FLOOR_SHADE)
    extent = [*differences, *(band or ()), *(_interval_ends(interval) if interval else ())]
    figure.update_xaxes(type="category", title_text="repetition", row=1, col=1)
    figure.update_yaxes(
        title_text=metric_axis_title(text_of(field_of(row, "metric"))), row=1, col=1
    )
    figure.update_xaxes(
        range=span_of([extent]), title_text="A / B - 1, % (shaded: within the floor)", row=1, col=2
    )
    figure.update_yaxes(type="category", autorange="reversed", row=1, col=2)
    return finish_figure(figure, FRAME_PX + max(240, 30 * len(pairs)))


def hit_rate_figure(row: Mapping[str, Any] | None) -> dict[str, Any]:
    """The offload tier's external prefix-cache hit rate against its floor, in percent."""
    rate = finite_float(field_of(row, "external_hit_rate"))
    floor = finite_float(field_of(row, "min_external_hit_rate"))
    figure = go.Figure()
    if rate is not None:
        color = verdict_style(text_of(field_of(row, "verdict")))[0]
        figure.add_trace(
            go.Bar(
                x=[rate * 100],
                y=["offload tier"],
                orientation="h",
                marker={"color": color},
                text=[f"{rate:.1%}"],
                textposition="outside",
                name="external hit rate",
                hovertext=[wrap_text(text_of(field_of(row, "cause")))],
                hoverinfo="text",
            )
        )
    else:
        figure.add_annotation(text="The hit rate was not observed.", showarrow=False)
    if floor is not None:
        figure.add_vline(x=floor * 100, line={"color": BAR_COLOR, "width": 3, "dash": "dash"})
        figure.add_annotation(
            x=floor * 100,
            y=1,
            yref="paper",
            yanchor="bottom",
            showarrow=False,
            text=f"floor {floor:.0%}",
        )
    figure.update_xaxes(
        range=[0, 105], ticksuffix=" %", title_text="external prefix-cache hit rate"
    )
    figure.update_yaxes(visible=rate is not None)
    figure.update_layout(showlegend=False)
    return finish_figure(figure, FRAME_PX + 90)


def _side_trace(reps: list[str], values: list[float | None], name: str, color: str) -> go.Scatter:
    return go.Scatter(
        x=reps,
        y=values,
        mode="lines+markers",
        name=name,
        line={"color": color},
        marker={"color": color, "size": 9},
        hoverinfo="x+y+name",
    )


def _difference_trace(differences: list[float | None], reps: list[str]) -> go.Scatter:
    return go.Scatter(
        x=differences,
        y=[f"repetition {rep}" for rep in reps],
        mode="markers",
        marker={"color": ARM_COLORS[-1], "size": 9},
        name="one repetition",
        hovertext=[
            f"repetition {r}: A is {show_number(d, ' %')} off B"
            for r, d in zip(reps, differences, strict=True)
        ],
        hoverinfo="text",
    )


def _interval_trace(row: Mapping[str, Any]) -> go.Scatter | None:
    mean = finite_float(row.get("mean_log_ratio"))
    low, high = finite_float(row.get("low_ratio")), finite_float(row.get("high_ratio"))
    if mean is None or abs(mean) > 700:
        return None
    centre = (math.exp(mean) - 1) * 100
    confidence = finite_float(row.get("confidence"))
    color, symbol = verdict_style(text_of(row.get("verdict")))
    return go.Scatter(
        x=[centre],
        y=[f"all pairs ({confidence:.0%})" if confidence is not None else "all pairs"],
        mode="markers",
        marker={"color": color, "symbol": symbol, "size": 12},
        error_x={
            "type": "data",
            "symmetric": False,
            "array": [gap_between(centre, None if high is None else (high - 1) * 100)],
            "arrayminus": [gap_between(None if low is None else (low - 1) * 100, centre)],
            "color": color,
            "thickness": 2,
        },
        name=f"interval: {text_of(row.get('verdict')) or 'no verdict'}",
        hovertext=[wrap_text(text_of(row.get("cause")))],
        hoverinfo="text",
    )


def _floor_band(limit: float | None) -> tuple[float, float] | None:
    """The allowed A/A difference in percent. The engine's band is symmetric in log-ratio,
    [1/(1+L), 1+L], so it is lopsided in percent: -9.1 % .. +10 % for L = 10 %."""
    if limit is None or limit < 0:
        return None
    return (1 / (1 + limit / 100) - 1) * 100, limit


def _interval_ends(trace: go.Scatter) -> list[float]:
    centre, error = trace.x[0], trace.error_x
    return [centre - error.arrayminus[0], centre + error.array[0]]


def _pair_name(pair: Mapping[str, Any], index: int) -> str:
    repetition = integer_or_none(pair.get("repetition"))
    return str(repetition) if repetition is not None else f"pair {index + 1}"


def _difference(a: float | None, b: float | None) -> float | None:
    return (a / b - 1) * 100 if a is not None and b is not None and b > 0 else None
