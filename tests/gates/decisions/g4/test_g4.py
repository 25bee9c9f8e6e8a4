"""G4 soak verdicts: crashes, error rate, drift, change points, memory growth, unobserved time."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.decisions import EvidenceError, decide_g4
from gates.decisions.changepoints import change_points
from tests.gates.decisions.test_g3 import valid

T0 = 1.8e9
WINDOW_S = 600.0


def g4_spec(**limits) -> dict:
    base = {
        "max_crashes": 0,
        "max_error_rate_pct": 0.5,
        "max_throughput_drift_pct": 10.0,
        "max_ttft_p99_change_pct": 20.0,
        "max_memory_growth_mib_per_h": 256,
        "max_unobserved_pct": 2.0,
    }
    base.update(limits)
    spec = {
        "gate": "G4",
        "version": 1,
        "duration_h": 72,
        "window_min": 10,
        "load": {
            "dataset": "random",
            "input_len": 64,
            "output_len": 8,
            "num_prompts": 64,
            "seed": 1,
        },
        "limits": base,
        "stop_loss": {"max_attempts": 2},
    }
    return valid("G4", spec)


def soak(
    count: int = 432,
    seed: int = 1,
    throughput=None,
    ttft=None,
    leak_mib_per_h=0.0,
    skip=(),
    crashed=(),
    failed: int = 0,
) -> list[dict]:
    rng = np.random.default_rng(seed)
    level = np.ones(count) if throughput is None else throughput(np.arange(count))
    latency = np.ones(count) if ttft is None else ttft(np.arange(count))
    windows = []
    for i in range(count):
        if i in skip:
            continue
        hours = (i + 0.5) * WINDOW_S / 3600
        windows.append(
            {
                "seq": i,
                "start": T0 + WINDOW_S * i,
                "end": T0 + WINDOW_S * (i + 1),
                "completed": 300,
                "failed": failed,
                "crashed": i in crashed,
                "output_throughput": 500 * level[i] * rng.lognormal(0, 0.03),
                "ttft_p99_ms": 2000 * latency[i] * rng.lognormal(0, 0.05),
                "memory_bytes": 40e9 + leak_mib_per_h * hours * 2**20 + rng.normal(0, 30e6),
            }
        )
    return windows


def row(result: dict, check: str) -> dict:
    return next(item for item in result["clauses"] if item["check"] == check)


def test_a_steady_72_hour_soak_passes():
    result = decide_g4(g4_spec(), soak())
    assert result["verdict"] == "pass", result["reasons"]
    assert row(result, "throughput_drift")["change_points"] == []
    json.dumps(result, allow_nan=False)


def test_a_crash_fails_even_before_the_soak_is_over():
    result = decide_g4(g4_spec(), soak(count=100, crashed={40}))
    assert result["verdict"] == "fail"
    assert row(result, "crashes")["crashed_windows"] == [40]
    assert row(result, "error_rate")["verdict"] == "inconclusive"


def test_an_unfinished_soak_is_inconclusive():
    result = decide_g4(g4_spec(), soak(count=200))
    assert result["verdict"] == "inconclusive"
    assert result["reasons"][0].startswith("crashes: soak ran 33.33 of 72.00 h; so far:")


def test_a_sustained_throughput_drop_is_found_as_a_change_point_and_fails():
    result = decide_g4(g4_spec(), soak(throughput=lambda i: np.where(i >= 300, 0.8, 1.0)))
    drift = row(result, "throughput_drift")
    assert result["verdict"] == "fail"
    assert [point["seq"] for point in drift["change_points"]] == [300]
    assert drift["observed"] == pytest.approx(20, abs=1.5)


def test_a_gradual_throughput_decline_counts_as_drift():
    result = decide_g4(g4_spec(), soak(throughput=lambda i: 1 - 0.2 * i / 432))
    assert row(result, "throughput_drift")["verdict"] == "fail"


def test_a_small_shift_within_the_limit_passes():
    result = decide_g4(g4_spec(), soak(throughput=lambda i: np.where(i >= 200, 0.95, 1.0)))
    assert row(result, "throughput_drift")["verdict"] == "pass"


def test_a_rise_in_ttft_p99_fails_but_a_fall_does_not():
    worse = decide_g4(g4_spec(), soak(ttft=lambda i: np.where(i >= 100, 1.5, 1.0)))
    better = decide_g4(g4_spec(), soak(ttft=lambda i: np.where(i >= 100, 0.6, 1.0)))
    assert row(worse, "ttft_p99_change")["verdict"] == "fail"
    assert row(better, "ttft_p99_change")["verdict"] == "pass"


def test_a_memory_leak_fails_on_the_theil_sen_interval():
    result = decide_g4(g4_spec(), soak(leak_mib_per_h=600))
    memory = row(result, "memory_growth")
    assert memory["verdict"] == "fail"
    assert memory["slope_low"] > 256 and memory["observed"] == pytest.approx(600, rel=0.05)


def test_error_rate_over_the_limit_fails():
    result = decide_g4(g4_spec(), soak(failed=3))
    assert row(result, "error_rate")["verdict"] == "fail"
    assert row(result, "error_rate")["observed"] == pytest.approx(100 * 3 / 303)


def test_gaps_between_windows_are_unobserved_time_and_too_much_makes_the_soak_invalid():
    result = decide_g4(g4_spec(), soak(skip=set(range(100, 120))))
    unobserved = row(result, "unobserved")
    assert unobserved["observed"] == pytest.approx(100 * 20 / 432)
    assert result["verdict"] == "invalid"


def test_a_window_delivered_twice_counts_once_but_conflicting_copies_are_refused():
    windows = soak()
    assert decide_g4(g4_spec(), [*windows, dict(windows[5])])["verdict"] == "pass"
    changed = dict(windows[5], failed=9)
    with pytest.raises(EvidenceError) as caught:
        decide_g4(g4_spec(), [*windows, changed])
    assert caught.value.field == "windows[432].seq"


def test_no_windows_is_inconclusive():
    assert decide_g4(g4_spec(), [])["verdict"] == "inconclusive"


def test_change_points_ignore_noise_and_find_a_step():
    rng = np.random.default_rng(8)
    noise = rng.normal(100, 3, 400)
    assert change_points(noise) == []
    step = np.concatenate([noise[:250], noise[250:] * 0.85])
    assert change_points(step) == [250]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
keys = st.sampled_from(
    [
        "seq",
        "start",
        "end",
        "completed",
        "failed",
        "output_throughput",
        "ttft_p99_ms",
        "memory_bytes",
        "crashed",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 29), keys, json_values), max_size=5))
def test_damaged_windows_give_a_verdict_or_an_evidence_error(damage):
    windows = soak(count=30)
    for index, key, value in damage:
        windows[index][key] = value
    try:
        result = decide_g4(g4_spec(), windows)
    except EvidenceError as error:
        assert error.field.startswith("windows")
        return
    assert result["verdict"] in ("pass", "fail", "inconclusive", "invalid") and result["reasons"]
    json.dumps(result, allow_nan=False)


def test_time_before_the_first_window_counts_as_unobserved_when_the_start_is_known():
    context = {"started_at": T0 - 3 * 3600, "ended_at": T0 + 432 * WINDOW_S}
    result = decide_g4(g4_spec(), soak(), context)
    assert row(result, "unobserved")["observed"] == pytest.approx(100 * 3 / 72)
    assert result["verdict"] == "invalid"
    assert result["inputs"]["span"]["started_at"] == T0 - 3 * 3600


def test_an_error_rate_the_remaining_windows_cannot_repair_fails_before_the_end():
    # 100 of 432 windows, every one with 10 % failures: even 332 perfect windows leave > 0.5 %.
    result = decide_g4(g4_spec(), soak(count=100, failed=30))
    assert result["verdict"] == "fail"
    errors = row(result, "error_rate")
    assert errors["verdict"] == "fail" and "beyond recovery" in errors["cause"]
    assert errors["best_possible_pct"] > 0.5


def test_an_error_rate_that_can_still_recover_is_inconclusive_before_the_end():
    # 2 failures per window (0.66 %, over the limit so far) could still end at 0.15 % after
    # 332 perfect windows.
    result = decide_g4(g4_spec(), soak(count=100, failed=2))
    assert row(result, "error_rate")["verdict"] == "inconclusive"
    assert result["verdict"] == "inconclusive"


def with_hits(windows: list[dict], rate) -> list[dict]:
    return [{**window, "external_hit_rate": rate(window["seq"])} for window in windows]


def test_a_tier_that_stops_being_hit_fails_naming_the_hour():
    windows = with_hits(soak(), lambda seq: 0.6 if seq < 180 else 0.0)  # hour 30
    result = decide_g4(g4_spec(), windows)
    hits = row(result, "offload_hits")
    assert (result["verdict"], hits["verdict"]) == ("fail", "fail")
    assert hits["stopped_seq"] == 180 and hits["stopped_hour"] == pytest.approx(30.0)
    assert "hour 30.00" in hits["cause"]


def test_a_tier_hit_all_along_passes_and_one_never_hit_is_invalid():
    steady = decide_g4(g4_spec(), with_hits(soak(), lambda seq: 0.5 + 0.1 * (seq % 3)))
    assert steady["verdict"] == "pass" and row(steady, "offload_hits")["median"] == 0.6
    never = decide_g4(g4_spec(), with_hits(soak(), lambda seq: 0.0))
    assert never["verdict"] == "invalid" and row(never, "offload_hits")["verdict"] == "invalid"
    assert not [r for r in decide_g4(g4_spec(), soak())["clauses"] if r["check"] == "offload_hits"]


def test_a_step_in_a_full_72_hour_soak_of_10_s_windows_is_found_where_it_happened():
    rng = np.random.default_rng(3)
    values = 500 * rng.lognormal(0, 0.03, 25920)
    values[13_001:] *= 0.85
    found = change_points(values)
    assert len(found) == 1 and abs(found[0] - 13_001) <= 13  # one block of 13 windows
    assert change_points(500 * rng.lognormal(0, 0.03, 25920)) == []
