"""The soak page's pure figure builders (gates/charts/g4.py): bounded points that keep every
extreme, full resolution when few, gaps shaded and broken, crashes and change points marked,
the numbers table, strict JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gates.charts import g4


def soak(count: int, *, spike_at: int | None = None, **extra) -> g4.SoakData:
    hours = np.arange(count) * 10 / 3600
    throughput = 500 + 5 * np.sin(np.arange(count) / 50)
    if spike_at is not None:
        throughput[spike_at] = 20.0  # a one-window dip: the crash-time kind a chart must show
    values = {"output_throughput": throughput, "ttft_p99_ms": np.full(count, 2000.0)}
    return g4.SoakData(hours=hours, values=values, total=count, **extra)


def traces(figure: dict) -> dict[str, dict]:
    return {trace["name"]: trace for trace in figure["data"]}


def test_a_long_soak_is_drawn_from_a_bounded_number_of_points_that_keep_its_extremes():
    data = soak(25920, spike_at=17001)
    figure = g4.soak_figure(data)
    line = traces(figure)["output throughput"]
    assert len(line["x"]) <= g4.PAGE_POINTS
    assert min(line["y"]) == 20.0  # the one-window dip survives downsampling
    assert max(line["y"]) == pytest.approx(505, abs=0.01)
    assert line["x"][0] == 0.0 and line["x"][-1] == pytest.approx(25919 * 10 / 3600, abs=1e-4)
    assert line["x"] == sorted(line["x"])
    json.dumps(figure, allow_nan=False)


def test_few_windows_or_full_resolution_draw_every_window():
    assert len(traces(g4.soak_figure(soak(300)))["output throughput"]["x"]) == 300
    full = g4.soak_figure(soak(3000), points=None)
    assert len(traces(full)["output throughput"]["x"]) == 3000


def test_missing_values_are_left_out_and_a_series_without_any_draws_nothing():
    data = soak(50)
    data.values["output_throughput"][10:20] = np.nan
    figure = g4.soak_figure(data)
    assert len(traces(figure)["output throughput"]["x"]) == 40
    assert traces(figure)["GPU memory used"]["x"] == []
    rows = {row["series"]: row for row in g4.summary_rows(data)}
    assert rows["output throughput"]["windows"] == 40
    assert rows["GPU memory used"] == {
        "series": "GPU memory used",
        "unit": "GiB",
        "windows": 0,
        **dict.fromkeys(("first", "min", "median", "max", "last")),
    }


def test_gaps_are_shaded_and_break_the_line_crashes_and_change_points_are_marked():
    gap = {"start_h": 0.1001, "end_h": 0.2, "cause": "agent down (restarted)"}
    data = soak(200, gaps=[gap], crashes=[0.3], change_points={"ttft_p99_ms": [0.4]})
    figure = g4.soak_figure(data)
    shapes = figure["layout"]["shapes"]
    rects = [shape for shape in shapes if shape["type"] == "rect"]
    assert [(r["x0"], r["x1"], r["yref"]) for r in rects] == [(0.1001, 0.2, "paper")]
    lines = [(s["x0"], s["xref"], s["yref"]) for s in shapes if s["type"] == "line"]
    ttft_row = g4.PANELS.index("Time to first token") + 1
    assert (0.3, "x", "paper") in lines  # a crash spans every panel
    assert (0.4, f"x{ttft_row}", f"y{ttft_row} domain") in lines  # a change point, its panel
    line = traces(figure)["output throughput"]
    broken = line["x"].index(0.1001)
    assert line["y"][broken] is None  # no line drawn across time nobody observed
    assert {"unobserved (gap)", "crash", "change point"} <= set(traces(figure))


def test_every_series_has_its_panel_and_unit_and_the_table_its_numbers():
    data = soak(5)
    data.values["output_throughput"] = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    titles = [note["text"] for note in g4.soak_figure(data)["layout"]["annotations"]]
    assert titles[0] == "Output throughput, tokens/s" and len(titles) == len(g4.PANELS)
    assert "Host memory, GiB" in titles
    row = g4.summary_rows(data)[0]
    assert (row["first"], row["min"], row["median"], row["max"], row["last"]) == (3, 1, 3, 5, 4)


def test_a_zoomed_figure_keeps_its_range_and_an_empty_soak_says_so():
    zoomed = g4.soak_figure(soak(100), x_range=(0.05, 0.1))
    assert zoomed["layout"]["xaxis"]["range"] == [0.05, 0.1]
    empty = g4.soak_figure(g4.SoakData(hours=np.array([]), values={}))
    assert "No window" in empty["layout"]["annotations"][0]["text"]


def test_change_points_come_from_the_drift_clauses_at_their_windows():
    result = {
        "clauses": [
            {"check": "throughput_drift", "change_points": [{"seq": 7, "hour": 0.01}]},
            {"check": "ttft_p99_change", "change_points": [{"seq": 99}]},
            {"check": "crashes", "observed": 0},
        ]
    }
    found = g4.change_point_hours(result, lambda seq: {7: 0.5}.get(seq))
    assert found == {"output_throughput": [0.5]}  # seq 99 is not in view
    assert g4.change_point_hours(None, lambda seq: 0.0) == {}
