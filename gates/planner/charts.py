"""The planner's concurrency x context heatmap of KV demand over capacity, with the fit boundary.

Pure: planner inputs in, a JSON-able Plotly figure dict out; no Django, no HTML, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from gates.planner import (
    PlanRequest,
    kv_capacity_per_gpu,
    kv_demand_per_gpu,
    max_concurrency_at,
    validate_deployment,
)

# Colour saturates at 16x either way: beyond that the cell's story is the same.
RATIO_LIMIT_LOG2 = 4
MAX_CONTEXT_LOG2 = 21  # 2M tokens, past every preset's window
MAX_CONCURRENCY_LOG2 = 12
BOUNDARY_STEPS_PER_OCTAVE = 4


def kv_fit_heatmap(request: PlanRequest) -> dict[str, Any]:
    """Heatmap of log2(KV demand / capacity) per GPU over concurrency x context, in log2 axes."""
    deployment = request.deployment
    validate_deployment(deployment)
    contexts = context_grid(request)
    concurrencies = concurrency_grid(request)
    capacity = kv_capacity_per_gpu(deployment)
    ratios = [
        [_ratio(kv_demand_per_gpu(deployment, c, t), capacity) for t in contexts]
        for c in concurrencies
    ]
    figure = go.Figure(
        data=[
            _heatmap(contexts, concurrencies, ratios),
            _boundary_line(request, contexts),
            _requested_point(request),
        ],
        layout=_layout(request, contexts, concurrencies),
    )
    document: dict[str, Any] = figure.to_plotly_json()  # plotly is untyped
    return document


def context_grid(request: PlanRequest) -> list[int]:
    """Powers of two from 1k (or lower, for a short request) past the model's window."""
    model_max = request.deployment.model.max_context or 0
    low = min(10, _log2_floor(request.context_tokens))
    high = _log2_ceil(max(model_max, 2 * request.context_tokens, 2**low * 2))
    return [2**k for k in range(low, min(high, MAX_CONTEXT_LOG2) + 1)]


def concurrency_grid(request: PlanRequest) -> list[int]:
    """Powers of two from 1 to well past both the request and what fits at its context."""
    fitting = max_concurrency_at(request.deployment, request.context_tokens)
    high = _log2_ceil(max(64, 2 * request.concurrency, 2 * fitting))
    return [2**k for k in range(min(high, MAX_CONCURRENCY_LOG2) + 1)]


def _heatmap(contexts: list[int], concurrencies: list[int], ratios: list[list[float]]) -> Any:
    return go.Heatmap(
        x=[math.log2(t) for t in contexts],
        y=[math.log2(c) for c in concurrencies],
        z=[[_clipped_log2(r) for r in row] for row in ratios],
        text=[[_ratio_label(r) for r in row] for row in ratios],
        customdata=[[[t, c] for t in contexts] for c in concurrencies],
        zmin=-RATIO_LIMIT_LOG2,
        zmid=0,
        zmax=RATIO_LIMIT_LOG2,
        colorscale="RdBu",
        reversescale=True,
        colorbar={
            "title": {"text": "KV demand / capacity"},
            "tickvals": list(range(-RATIO_LIMIT_LOG2, RATIO_LIMIT_LOG2 + 1, 2)),
            "ticktext": ["1/16x", "1/4x", "1x", "4x", "16x"],
        },
        hovertemplate=(
            "%{customdata[1]:,} requests x %{customdata[0]:,} tokens: "
            "%{text} of KV capacity<extra></extra>"
        ),
        name="demand / capacity",
    )


def _boundary_line(request: PlanRequest, contexts: list[int]) -> Any:
    """Largest concurrency that still fits, traced between the grid's contexts."""
    low, high = math.log2(contexts[0]), math.log2(contexts[-1])
    steps = round((high - low) * BOUNDARY_STEPS_PER_OCTAVE)
    xs = [low + (high - low) * i / max(1, steps) for i in range(steps + 1)]
    fitting = [max_concurrency_at(request.deployment, round(2**x)) for x in xs]
    return go.Scatter(
        x=xs,
        y=[math.log2(c) if c >= 1 else None for c in fitting],
        customdata=[[round(2**x), c] for x, c in zip(xs, fitting, strict=True)],
        mode="lines",
        line={"color": "black", "width": 3},
        name="fit boundary",
        hovertemplate="%{customdata[1]:,} requests fit at %{customdata[0]:,} tokens<extra></extra>",
    )


def _requested_point(request: PlanRequest) -> Any:
    return go.Scatter(
        x=[math.log2(request.context_tokens)],
        y=[math.log2(request.concurrency)],
        mode="markers",
        marker={"symbol": "x", "size": 14, "color": "black"},
        name="this workload",
        hovertemplate=(
            f"{request.concurrency:,} requests x {request.context_tokens:,} tokens<extra></extra>"
        ),
    )


def _layout(request: PlanRequest, contexts: list[int], concurrencies: list[int]) -> Any:
    deployment = request.deployment
    title = (
        f"{deployment.model.name}: KV demand vs. VRAM capacity ({deployment.gpus} x "
        f"{deployment.gpu_mem_gib:g} GiB, TP {deployment.tp}, KV {deployment.kv_dtype})"
    )
    return go.Layout(
        title={"text": title},
        template="none",
        xaxis=_log2_axis("context length, tokens", contexts),
        yaxis=_log2_axis("concurrent requests", concurrencies),
        legend={"orientation": "h", "y": -0.2},
    )


def _log2_axis(title: str, values: list[int]) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "tickvals": [math.log2(v) for v in values],
        "ticktext": [_short_count(v) for v in values],
        "range": [math.log2(values[0]) - 0.5, math.log2(values[-1]) + 0.5],
    }


def _ratio(demand: int, capacity: int) -> float:
    return math.inf if capacity == 0 else demand / capacity


def _clipped_log2(ratio: float) -> float:
    return max(-RATIO_LIMIT_LOG2, min(RATIO_LIMIT_LOG2, math.log2(ratio)))


def _ratio_label(ratio: float) -> str:
    return "no VRAM left" if math.isinf(ratio) else f"{ratio:.0%}"


def _short_count(value: int) -> str:
    if value >= 2**20:
        return f"{value // 2**20}M"
    if value >= 2**10:
        return f"{value // 2**10}k"
    return str(value)


def _log2_floor(value: int) -> int:
    return max(0, value.bit_length() - 1)


def _log2_ceil(value: int) -> int:
    return max(0, (value - 1).bit_length())
