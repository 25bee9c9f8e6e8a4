"""The incremental G4 verdict: a soak's summary folded a tick at a time (stored as JSON between
ticks, its points as rows) decides exactly what folding every window at once decides, on
generated soaks with crashes, failed requests, gaps, missing values, hit-rate tails, blocks of
several windows and thinned memory samples; and the summarised decision still finds what a
72 h soak of 10 s windows shows (a throughput drop, memory growth) at a bounded cost."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.decisions import decide_gate
from gates.decisions.g4 import decide_g4_summary
from gates.decisions.g4_summary import (
    MAX_CPD_POINTS,
    NeedsEveryWindow,
    Point,
    summary_empty,
    summary_fold,
    summary_start,
)
from gates.decisions.windows import parse_windows
from gates.specs.validation import default_spec, parse_spec

T0 = 1.8e9


def g4_spec(duration_h: float, window_min: float) -> dict:
    document = default_spec("G4")
    document.update(duration_h=duration_h, window_min=window_min)
    return parse_spec(document, "G4")


@st.composite
def soaks(draw):
    """Windows of a soak as the collector stores them, in seq order."""
    count = draw(st.integers(min_value=0, max_value=120))
    windows, at, seq = [], T0, 0
    for _ in range(count):
        seq += draw(st.sampled_from([1, 1, 1, 2]))
        at += draw(st.sampled_from([0.0, 0.0, 0.001, 3.0, 45.0]))  # contiguous, jitter, gaps
        length = draw(st.sampled_from([10.0, 10.0, 9.5]))
        crashed = draw(st.booleans().filter(lambda _: True)) and draw(st.integers(0, 9)) == 0
        number = st.one_of(st.none(), st.floats(min_value=1, max_value=1e4))
        windows.append(
            {
                "seq": seq,
                "start": at,
                "end": at + length,
                "crashed": crashed,
                "completed": draw(st.one_of(st.none(), st.integers(0, 400))),
                "failed": draw(st.sampled_from([None, 0, 0, 0, 1, 30])),
                "memory_bytes": draw(st.one_of(st.none(), st.floats(1e9, 2e9))),
                "output_throughput": draw(number),
                "ttft_p99_ms": draw(number),
                "external_hit_rate": draw(st.sampled_from([None, 0.0, 0.005, 0.4, 0.6])),
            }
        )
        at += length
    return windows


def fold_in_ticks(summary, windows, cuts):
    """Fold tick by tick, the summary through JSON between ticks as the database keeps it."""
    points: list[Point] = []
    for chunk in np.array_split(np.arange(len(windows)), cuts):
        summary = json.loads(json.dumps(summary))
        points += summary_fold(summary, parse_windows([windows[i] for i in chunk]))
    return json.loads(json.dumps(summary)), [Point(*json.loads(json.dumps(p))) for p in points]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    windows=soaks(),
    cuts=st.integers(1, 12),
    block=st.sampled_from([1, 1, 2, 3, 7]),
    stride=st.sampled_from([1, 2, 5]),
    duration_h=st.sampled_from([0.05, 0.2, 1.0]),
    started_late=st.booleans(),
    exited_after=st.sampled_from([None, 0.0, 600.0]),
)
def test_a_soak_folded_tick_by_tick_decides_what_every_window_decides(
    windows, cuts, block, stride, duration_h, started_late, exited_after
):
    spec = g4_spec(duration_h, 1 / 6)
    started = T0 + (5.0 if started_late else -2.0)
    ended = (windows[-1]["end"] if windows else started) + (exited_after or 0.0)
    context = {"started_at": started, "ended_at": ended, "block": block, "memory_stride": stride}
    full = decide_gate(spec, windows, context)
    summary, points = fold_in_ticks(summary_empty(block=block, memory_stride=stride), windows, cuts)
    try:
        incremental = decide_g4_summary(spec, summary, points, context)
    except NeedsEveryWindow:
        # The span clips observed time the summary settled: the collector reads every window.
        assert started_late or len(windows) > 64
        incremental = decide_g4_summary(
            spec, summary, points, context, windows=parse_windows(windows)
        )
    assert incremental == full
    assert full["inputs"]["limits"]["block_windows"] == block


def test_the_block_and_stride_come_from_the_planned_windows():
    seventy_two_hours = summary_start(g4_spec(72, 10 / 60))  # 25,920 windows planned
    assert seventy_two_hours["block"] == 13 and seventy_two_hours["memory_stride"] == 26
    one_hour = summary_start(g4_spec(1, 0.5))  # 120 windows: every window its own point
    assert one_hour["block"] == 1 and one_hour["memory_stride"] == 1


def test_a_repeated_or_earlier_window_is_refused():
    summary = summary_empty(block=1, memory_stride=1)
    window = {"seq": 3, "start": T0, "end": T0 + 10, "crashed": False}
    summary_fold(summary, parse_windows([window]))
    with pytest.raises(Exception, match="window 3 after window 3"):
        summary_fold(summary, parse_windows([window]))


def long_soak(drop_at_h: float | None, growth_mib_per_h: float) -> list[dict]:
    """72 h of 10 s windows: throughput 500 with 2 % noise, dropping 20 % at `drop_at_h`."""
    rng = np.random.default_rng(7)
    count = 72 * 360
    hours = np.arange(count) * 10 / 3600
    level = np.where(hours >= (drop_at_h if drop_at_h is not None else math.inf), 400.0, 500.0)
    throughput = level * (1 + 0.02 * rng.standard_normal(count))
    memory = 40e9 + growth_mib_per_h * 2**20 * hours + 50 * 2**20 * rng.standard_normal(count)
    return [
        {
            "seq": i,
            "start": T0 + 10 * i,
            "end": T0 + 10 * (i + 1),
            "crashed": False,
            "completed": 300,
            "failed": 0,
            "memory_bytes": float(memory[i]),
            "output_throughput": float(throughput[i]),
            "ttft_p99_ms": 2000.0,
            "external_hit_rate": 0.6,
        }
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("drop_at_h", "growth", "verdict"),
    [(None, 0.0, "pass"), (40.0, 0.0, "fail"), (None, 400.0, "fail")],
)
def test_a_72_hour_soak_is_judged_from_bounded_points(drop_at_h, growth, verdict):
    spec = g4_spec(72, 10 / 60)
    windows = long_soak(drop_at_h, growth)
    summary = summary_start(spec)
    points = summary_fold(summary, parse_windows(windows))
    # What re-judging reads: about 2,000 blocks per series and 1,000 memory samples, not 25,920.
    by_series = {name: sum(p.series == name for p in points) for name in {p.series for p in points}}
    assert max(by_series.values()) <= MAX_CPD_POINTS
    assert 900 < by_series["memory_bytes"] <= 1000
    context = {"started_at": T0, "ended_at": windows[-1]["end"]}
    result = decide_g4_summary(spec, summary, points, context)
    assert result["verdict"] == verdict
    rows = {row["check"]: row for row in result["clauses"]}
    drift = rows["throughput_drift"]
    if drop_at_h is None:
        assert drift["change_points"] == []
    else:
        # The drop is found within a block or two (a block is 13 windows: 130 s), and it is
        # the worst segment; a short harmless blip elsewhere may be a segment of its own.
        hours = [point["hour"] for point in drift["change_points"]]
        assert min(abs(hour - drop_at_h) for hour in hours) < 0.1
        assert drift["observed"] == pytest.approx(20, abs=1)
    memory = rows["memory_growth"]
    assert memory["slope_low"] <= growth <= memory["slope_high"]
