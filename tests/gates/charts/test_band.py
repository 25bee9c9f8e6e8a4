"""The predicted TTFT band as a chart: one filled range per tier around the 0 % line, a run's
measured change as points, tiers in order, broken tiers left out, never an error."""

from __future__ import annotations

import json

from gates.charts.band import ttft_band_figure

TIERS = [
    {"concurrency": 16, "low": -0.32, "high": -0.24},
    {"concurrency": 4, "low": -0.05, "high": 0.03},
]


def test_each_tier_is_a_range_from_its_low_to_its_high_end_in_percent():
    figure = ttft_band_figure(TIERS)
    (bars,) = figure["data"]
    assert bars["type"] == "bar" and bars["name"] == "predicted band"
    assert bars["x"] == ["c=4", "c=16"]  # by concurrency, whatever order the tiers came in
    assert [round(b, 9) for b in bars["base"]] == [-5.0, -32.0]
    assert [round(b + h, 9) for b, h in zip(bars["base"], bars["y"], strict=True)] == [3.0, -24.0]
    assert bars["hovertext"][1] == "c=16: predicted -32 % to -24 %"  # through gates.figures


def test_the_zero_line_and_the_axes_say_what_is_measured():
    figure = ttft_band_figure(TIERS)
    (zero,) = figure["layout"]["shapes"]
    assert zero["y0"] == zero["y1"] == 0
    assert figure["layout"]["yaxis"]["ticksuffix"] == " %"
    assert figure["layout"]["yaxis"]["title"]["text"] == "TTFT p50 change"
    assert figure["layout"]["xaxis"]["title"]["text"] == "concurrency tier"


def test_a_runs_measured_change_is_a_point_on_its_tier_and_a_tier_not_measured_has_none():
    figure = ttft_band_figure(TIERS, {16: -0.3, 4: None}, "measured in this run")
    _band, points = figure["data"]
    assert points["mode"] == "markers" and points["name"] == "measured in this run"
    assert points["x"] == ["c=16"] and points["y"] == [-30.0]
    assert points["hovertext"] == ["c=16: measured in this run -30 %"]


def test_without_measurements_only_the_band_is_drawn():
    assert [trace["name"] for trace in ttft_band_figure(TIERS, {})["data"]] == ["predicted band"]


def test_broken_tiers_are_left_out_and_no_tier_says_so():
    broken = [{"concurrency": "x", "low": 0, "high": 1}, {"concurrency": 8, "low": None}]
    figure = ttft_band_figure([*broken, {"concurrency": 2, "low": 0.1, "high": float("inf")}])
    assert figure["data"] == []
    assert "No tier of the band is computed yet." in figure["layout"]["annotations"][0]["text"]
    json.dumps(ttft_band_figure(TIERS, {16: float("nan")}), allow_nan=False)
