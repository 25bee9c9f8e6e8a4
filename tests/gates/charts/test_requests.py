"""The per-request figures of a run: arms overlaid per tier, thinned to a bounded number of
points that keeps the extremes (and says so), an arm without records named, never drawn empty."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gates.charts import requests
from gates.charts.requests import (
    arrival_error_figure,
    decimate_extremes,
    ecdf_points,
    requests_by_tier,
    ttft_by_send_time_figure,
    ttft_ecdf_figure,
)


def row(arm: str, tier: int = 8, repetition: int = 1, **per_request) -> dict:
    metrics = {"ttft_p50": 1.0}
    if per_request:
        metrics["per_request"] = per_request
    return {"arm": arm, "tier": tier, "repetition": repetition, "metrics": metrics}


def replay(arm: str, ttft: list, *, late_ms: float = 1.0, repetition: int = 1) -> dict:
    at = [float(i) for i in range(len(ttft))]
    sent = [a + late_ms / 1000 for a in at]
    return row(arm, repetition=repetition, sent_s=sent, send_at_s=at, ttft_ms=ttft)


def tier_of(*rows: dict) -> requests.TierRequests:
    (tier,) = requests_by_tier(list(rows))
    return tier


def notes(figure: dict) -> str:
    return " ".join(item["text"] for item in figure["layout"].get("annotations", []))


def test_arms_are_overlaid_in_one_figure_per_tier_in_the_pages_arm_order():
    rows = [replay("offload", [5.0, 6.0]), replay("baseline", [9.0, 8.0]), row("offload", tier=4)]
    tiers = requests_by_tier(rows)
    assert [tier.tier for tier in tiers] == [4, 8]
    figure = ttft_by_send_time_figure(tiers[1])
    assert [trace["name"] for trace in figure["data"]] == ["baseline", "offload"]
    baseline = figure["data"][0]
    assert baseline["x"] == [0.001, 1.001] and baseline["y"] == [9.0, 8.0]
    assert figure["layout"]["xaxis"]["title"]["text"] == "sent, s from the bench's start"
    assert figure["layout"]["yaxis"]["title"]["text"] == "TTFT, ms"
    assert baseline["hovertext"][0] == "baseline r1: sent 0.001 s, TTFT 9 ms"


def test_repetitions_of_an_arm_are_pooled_into_its_one_trace():
    tier = tier_of(replay("offload", [1.0, 2.0]), replay("offload", [3.0], repetition=2))
    (trace,) = ttft_by_send_time_figure(tier)["data"]
    assert sorted(trace["y"]) == [1.0, 2.0, 3.0]
    assert any(text.startswith("offload r2: ") for text in trace["hovertext"])


def test_a_bench_without_send_times_plots_ttft_by_request_number():
    tier = tier_of(row("baseline", ttft_ms=[4.0, None, 6.0], e2el_ms=[9.0, None, 9.0]))
    figure = ttft_by_send_time_figure(tier)
    (trace,) = figure["data"]
    assert trace["x"] == [1.0, 3.0] and trace["y"] == [4.0, 6.0]  # the failed one is a gap
    assert figure["layout"]["xaxis"]["title"]["text"] == "request, in send order"


def test_an_arm_without_per_request_records_is_named_in_a_note_not_drawn_empty():
    tier = tier_of(replay("offload", [5.0]), row("recompute"))
    for figure in (ttft_by_send_time_figure(tier), ttft_ecdf_figure(tier)):
        assert [trace["name"] for trace in figure["data"]] == ["offload"]
        assert "no per-request TTFTs kept for recompute" in notes(figure)
    arrival = arrival_error_figure(tier, 10.0)
    assert "no scheduled send times kept for recompute" in notes(arrival)


def test_the_ecdf_rises_from_the_fastest_to_the_slowest_request():
    figure = ttft_ecdf_figure(tier_of(replay("offload", [30.0, 10.0, 20.0, 40.0])))
    (trace,) = figure["data"]
    assert trace["x"] == [10.0, 20.0, 30.0, 40.0] and trace["y"] == [25.0, 50.0, 75.0, 100.0]
    assert trace["line"]["shape"] == "hv"
    assert figure["layout"]["yaxis"]["range"] == [0, 100]
    assert trace["hovertext"][1] == "offload: 50 % of requests at or under 20 ms"


def test_the_arrival_error_is_sent_minus_scheduled_with_the_bar_drawn_either_side():
    figure = arrival_error_figure(tier_of(replay("offload", [1.0, 2.0], late_ms=3.0)), 10.0)
    (trace,) = figure["data"]
    assert [round(value, 6) for value in trace["y"]] == [3.0, 3.0]
    assert trace["x"] == [0.0, 1.0]
    bars = sorted(shape["y0"] for shape in figure["layout"]["shapes"])
    assert bars == [-10.0, 10.0]
    assert "fidelity bar, p99 of |error| under 10 ms" in notes(figure)
    assert trace["hovertext"][0] == "offload r1: due 0 s, 3 ms late"


def test_a_large_cell_is_thinned_to_the_limit_keeps_its_extremes_and_says_so():
    ttft = [100.0 + (i % 7) for i in range(10_000)]
    ttft[4321], ttft[9876] = 5_000.0, 1.0  # one spike, one very fast request
    tier = tier_of(replay("offload", ttft), replay("baseline", [1.0, 2.0]))
    figure = ttft_by_send_time_figure(tier, limit=500)
    offload = next(trace for trace in figure["data"] if trace["name"] == "offload")
    assert len(offload["y"]) <= 500
    assert max(offload["y"]) == 5_000.0 and min(offload["y"]) == 1.0
    assert "offload: " in notes(figure) and "of 10,000 requests drawn" in notes(figure)
    assert "baseline:" not in notes(figure)  # small enough: drawn whole, nothing said
    ecdf = ttft_ecdf_figure(tier, limit=500)
    line = next(trace for trace in ecdf["data"] if trace["name"] == "offload")
    assert len(line["x"]) <= 500 and line["x"][0] == 1.0 and line["x"][-1] == 5_000.0
    assert "of 10,000 requests drawn (even ranks, min and max kept)" in notes(ecdf)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3000),
    st.integers(2, 400),
)
def test_decimation_is_bounded_and_keeps_the_minimum_and_the_maximum(values, limit):
    x = list(range(len(values)))
    kept = decimate_extremes(x, values, limit)
    assert len(kept) <= max(limit, 2) and len(set(kept)) == len(kept)
    shown = [values[i] for i in kept]
    assert min(shown) == min(values) and max(shown) == max(values)
    assert kept == sorted(kept)  # in x order, as a line through them would be drawn


def test_the_ecdf_of_nothing_is_empty():
    assert ecdf_points([]) == ([], [])


def test_every_figure_is_strict_json_with_gaps_for_broken_values():
    tier = tier_of(
        row(
            "offload", sent_s=[0.0, "x", 2.0], send_at_s=[0.0, 1.0, None], ttft_ms=[1.0, 2.0, 3e400]
        )
    )
    for figure in (
        ttft_by_send_time_figure(tier),
        ttft_ecdf_figure(tier),
        arrival_error_figure(tier, None),
    ):
        json.dumps(figure, allow_nan=False)
