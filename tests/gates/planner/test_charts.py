"""The planner heatmap: its cells, boundary line and marker agree with the planner's arithmetic."""

from __future__ import annotations

import json
import math

from gates.planner import (
    Deployment,
    PlanRequest,
    kv_capacity_per_gpu,
    kv_demand_per_gpu,
    max_concurrency_at,
    preset_model,
)
from gates.planner.charts import concurrency_grid, context_grid, kv_fit_heatmap


def plan_request(model: str = "llama-3.1-70b", gpu_mem_gib: float = 80.0) -> PlanRequest:
    deployment = Deployment(model=preset_model(model), gpus=8, gpu_mem_gib=gpu_mem_gib)
    return PlanRequest(deployment, concurrency=64, context_tokens=32_000, reuse_ratio=0.5)


def traces(figure: dict) -> dict[str, dict]:
    return {trace["name"]: trace for trace in figure["data"]}


def test_the_figure_is_plain_json_with_heatmap_boundary_and_marker() -> None:
    figure = kv_fit_heatmap(plan_request())
    assert json.loads(json.dumps(figure)) == figure
    kinds = {name: trace["type"] for name, trace in traces(figure).items()}
    assert kinds == {
        "demand / capacity": "heatmap",
        "fit boundary": "scatter",
        "this workload": "scatter",
    }


def test_cells_are_blue_exactly_where_the_planner_says_it_fits() -> None:
    request = plan_request()
    heatmap = traces(kv_fit_heatmap(request))["demand / capacity"]
    capacity = kv_capacity_per_gpu(request.deployment)
    for y, row in zip(heatmap["y"], heatmap["z"], strict=True):
        for x, z in zip(heatmap["x"], row, strict=True):
            demand = kv_demand_per_gpu(request.deployment, round(2**y), round(2**x))
            assert (z <= 0) == (demand <= capacity)


def test_the_boundary_line_traces_the_largest_concurrency_that_fits() -> None:
    request = plan_request()
    line = traces(kv_fit_heatmap(request))["fit boundary"]
    for x, y, (context, fitting) in zip(line["x"], line["y"], line["customdata"], strict=True):
        assert fitting == max_concurrency_at(request.deployment, context)
        assert context == round(2**x)
        assert y is None if fitting == 0 else math.isclose(y, math.log2(fitting))


def test_the_grid_covers_the_request_and_the_model_window() -> None:
    request = plan_request()
    contexts, concurrencies = context_grid(request), concurrency_grid(request)
    assert contexts[0] <= 1024 and contexts[-1] >= 131_072
    assert contexts[0] <= request.context_tokens <= contexts[-1]
    assert concurrencies[0] == 1 and concurrencies[-1] >= 2 * request.concurrency
    marker = traces(kv_fit_heatmap(request))["this workload"]
    assert marker["x"] == [math.log2(32_000)] and marker["y"] == [6.0]


def test_no_room_for_kv_shows_every_cell_over_capacity() -> None:
    request = plan_request("qwen3-coder-480b-a35b")
    figure = traces(kv_fit_heatmap(request))
    heatmap, line = figure["demand / capacity"], figure["fit boundary"]
    assert all(z == 4 for row in heatmap["z"] for z in row)
    assert {text for row in heatmap["text"] for text in row} == {"no VRAM left"}
    assert all(y is None for y in line["y"])
