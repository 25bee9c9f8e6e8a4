from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost.server.faults import (
    FaultConfig,
    FaultConfigError,
    FaultDice,
    build_fault_config,
    parse_fault_text,
)


def test_every_fault_is_off_by_default():
    config = FaultConfig()
    assert not config.any_active()
    assert not config.should_crash(10**6, 10**6)
    assert not config.should_hang(10**6, 10**6)
    assert config.drift_factor(100.0) == 1.0
    assert config.leaked_bytes(100.0) == 0


def test_flags_override_the_fault_file():
    from_file = parse_fault_text('{"error_rate": 0.5, "crash_after_requests": 3}', "f.json")
    config = build_fault_config(from_file, {"error_rate": 0.1, "crash_after_seconds": None})
    assert config.error_rate == 0.1
    assert config.crash_after_requests == 3
    assert config.any_active()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"error_rate": 2}', "error_rate"),
        ('{"crash_after_requests": -1}', "crash_after_requests"),
        ('{"crash_after_requests": 1.5}', "crash_after_requests"),
        ('{"clock": "sundial"}', "clock"),
        ('{"hang_after_seconds": "soon"}', "hang_after_seconds"),
        ('{"explode": true}', "explode"),
    ],
)
def test_a_bad_fault_file_names_the_field(text, field):
    with pytest.raises(FaultConfigError, match=field):
        parse_fault_text(text, "faults.json")


def test_a_fault_file_that_is_not_json_names_the_file():
    with pytest.raises(FaultConfigError, match=r"faults\.json"):
        parse_fault_text("{nope", "faults.json")


def test_drift_and_growth_follow_the_chosen_clock():
    wall = FaultConfig(latency_drift_pct_per_hour=10.0, memory_growth_mib_per_hour=60.0)
    emulated = FaultConfig(latency_drift_pct_per_hour=10.0, clock="emulated")
    assert wall.elapsed_hours(1800.0, time_scale=0.01) == 0.5
    assert emulated.elapsed_hours(18.0, time_scale=0.01) == 0.5
    assert wall.drift_factor(2.0) == pytest.approx(1.2)
    assert wall.leaked_bytes(0.5) == 30 * 2**20


def test_crash_and_hang_trigger_on_count_or_time():
    config = FaultConfig(crash_after_requests=5, hang_after_seconds=2.0)
    assert not config.should_crash(4, 0.0)
    assert config.should_crash(5, 0.0)
    assert not config.should_hang(100, 1.9)
    assert config.should_hang(0, 2.0)


def test_the_error_dice_replay_with_the_same_seed():
    config = FaultConfig(error_rate=0.3, seed=4)
    dice_a, dice_b = FaultDice(config), FaultDice(config)
    draws = [dice_a.fail_this_request() for _ in range(50)]
    assert draws == [dice_b.fail_this_request() for _ in range(50)]
    assert any(draws) and not all(draws)


@given(st.floats(0.05, 0.95))
def test_the_error_rate_is_about_the_asked_fraction(rate):
    dice = FaultDice(FaultConfig(error_rate=rate, seed=1))
    failures = sum(dice.fail_this_request() for _ in range(4000))
    # binomial: 4000 draws, 5 standard deviations at most 0.04
    assert abs(failures / 4000 - rate) < 0.04


def test_wrong_output_picks_the_same_prompts_every_time():
    dice = FaultDice(FaultConfig(wrong_output_rate=0.5))
    picks = [dice.corrupt_this_output(p) for p in range(200)]
    assert picks == [dice.corrupt_this_output(p) for p in range(200)]
    assert all(isinstance(pick, bool) for pick in picks)
    assert 60 < sum(picks) < 140
