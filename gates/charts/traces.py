"""A workload trace's pictures: the LRU hit-ratio curve with each tier's capacity marked, the
reuse-distance CDF, and the arrival rate over time. Pure: the characterisation's dict (and the
planner's tiers) in, Plotly figures (dicts) out; no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from gates.charts.style import ARM_COLORS, finish_figure

CURVE_COLOR = "#1f5fbf"
CEILING_COLOR = "#667085"
TIER_COLORS = {"gpu": "#128277", "dram": "#e8710a", "ssd": "#7b3fb5"}
TIER_NAMES = {"gpu": "GPU KV pool", "dram": "DRAM", "ssd": "SSD"}


def hit_curve_figure(
    profile: Mapping[str, Any],
    tiers: Sequence[Mapping[str, Any]] = (),
    measured: Sequence[Mapping[str, Any]] = (),
) -> dict:
    """F(C) on a log capacity axis, the infinite-cache ceiling, a line per tier size, and the
    hit rates this engagement's runs measured on the trace (gates.history.trace_points), one
    legend entry per run and kind of point, the hover naming the run and the cell."""
    points = profile.get("hit_ratio_curve") or []
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[1] * 100 for p in points],
            mode="lines",
            line={"shape": "hv", "color": CURVE_COLOR},
            name="LRU hit ratio",
            hovertemplate="%{x:,} tokens: %{y:.1f} % of input tokens<extra></extra>",
        )
    )
    ceiling = profile.get("infinite_cache_hit_ratio")
    if ceiling is not None:
        figure.add_hline(
            y=ceiling * 100,
            line_dash="dot",
            line_color=CEILING_COLOR,
            annotation_text=f"infinite cache {ceiling:.1%}",
        )
    for tier in tiers:
        if tier["capacity_tokens"] > 0:
            figure.add_vline(
                x=tier["capacity_tokens"],
                line_color=TIER_COLORS.get(tier["tier"], ARM_COLORS[0]),
                annotation_text=TIER_NAMES.get(tier["tier"], tier["tier"]),
                annotation_position="top left",
            )
    _measured_points(figure, measured)
    figure.update_xaxes(type="log", title="cache capacity (tokens)")
    figure.update_yaxes(title="hit ratio (% of input tokens)", range=[0, 100])
    return finish_figure(figure, 380)


POINT_KINDS = {
    "gpu": ("GPU cache", "circle"),
    "tiers": ("GPU + offload tier", "diamond"),
}


def _measured_points(figure: go.Figure, measured: Sequence[Mapping[str, Any]]) -> None:
    groups: dict[tuple[Any, str], list[Mapping[str, Any]]] = {}
    for point in measured:
        groups.setdefault((point["run"], point["kind"]), []).append(point)
    for index, ((_, kind), points) in enumerate(groups.items()):
        first = points[0]
        words, symbol = POINT_KINDS.get(kind, (kind, "circle"))
        run = f"{first['gate']} run #{first['attempt']}"
        figure.add_trace(
            go.Scatter(
                x=[point["capacity_tokens"] for point in points],
                y=[point["hit"] * 100 for point in points],
                mode="markers",
                marker={"symbol": symbol, "size": 11, "color": MEASURED_COLORS[index % 6]},
                name=f"{run}: {words}, measured",
                text=[_hover(run, words, point) for point in points],
                hovertemplate="%{text}<extra></extra>",
            )
        )


MEASURED_COLORS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _hover(run: str, words: str, point: Mapping[str, Any]) -> str:
    sample = point.get("sample", 1.0)
    sampled = f"; replayed {sample:.0%} of the sessions" if sample < 1.0 else ""
    return (
        f"{run}, {point['arm']} c={point['tier']}: {words} hit {point['hit']:.1%} of input "
        f"tokens at {point['capacity_tokens']:,} tokens (mean of {point['repetitions']} "
        f"repetitions{sampled})"
    )


def reuse_cdf_figure(profile: Mapping[str, Any]) -> dict:
    """The share of reuses at or under each distance: in blocks (LRU stack distance) and in
    seconds since the block was last used, two panels side by side."""
    reuse = profile.get("reuse_distance") or {}
    figure = go.Figure()
    for index, (unit, axis) in enumerate((("blocks", "x"), ("seconds", "x2"))):
        section = reuse.get(unit) or {}
        cdf = section.get("cdf") or []
        figure.add_trace(
            go.Scatter(
                x=[point[0] for point in cdf],
                y=[point[1] * 100 for point in cdf],
                mode="lines+markers",
                line={"shape": "hv", "color": ARM_COLORS[index]},
                name=f"distance in {unit}",
                xaxis=axis,
                hovertemplate=f"≤ %{{x:,}} {unit}: %{{y:.1f}} % of reuses<extra></extra>",
            )
        )
    figure.update_layout(
        xaxis={"type": "log", "domain": [0, 0.46], "title": "distinct blocks between uses"},
        xaxis2={"type": "log", "domain": [0.54, 1], "title": "seconds between uses"},
        yaxis={"title": "% of reuses at or under", "range": [0, 100]},
    )
    return finish_figure(figure, 340)


def arrival_rate_figure(profile: Mapping[str, Any]) -> dict:
    """Requests per minute from the first request: the load shape the replay keeps."""
    per_minute = (profile.get("arrivals") or {}).get("per_minute") or []
    figure = go.Figure(
        go.Bar(
            x=list(range(len(per_minute))),
            y=per_minute,
            marker_color=CURVE_COLOR,
            name="requests per minute",
            hovertemplate="minute %{x}: %{y} requests<extra></extra>",
        )
    )
    figure.update_xaxes(title="minutes from the first request")
    figure.update_yaxes(title="requests per minute")
    return finish_figure(figure, 300)
