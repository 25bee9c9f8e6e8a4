"""Issue 26, item 6: the operating characteristic warns when one of its own error rows (every
clause at its bar, one attempt; a lifetime row over the engagement) is above the declared rate
by more than that row's sampling error, and stays quiet within it. Pure and seeded."""

from __future__ import annotations

from documents.characteristic import GateCharacteristic, LifetimeRow
from gates.decisions.statistics.operating import _warnings, operating_characteristic
from gates.decisions.statistics.simulation import wilson_half_width
from tests.gates.decisions.test_g3 import g3_spec

DECLARED = 0.025  # confidence 0.90 over 2 attempts: 2.5 % per side per attempt
DRAWS = 20_000  # the OC's default gates per row


def outcome(passed: float, failed: float) -> dict:
    return {
        "pass": passed,
        "fail": failed,
        "inconclusive": 1 - passed - failed,
        "repetitions": 20.0,
        "half_width_95": {
            "pass": wilson_half_width(passed, DRAWS),
            "fail": wilson_half_width(failed, DRAWS),
            "inconclusive": wilson_half_width(1 - passed - failed, DRAWS),
        },
    }


def gate(at_bars: dict, lifetime: list[LifetimeRow] | None = None) -> GateCharacteristic:
    found: GateCharacteristic = {
        "at_claims": {**outcome(0.9, 0.0), "host_hours": None},  # type: ignore[typeddict-item]
        "at_bars": at_bars,  # type: ignore[typeddict-item]
    }
    if lifetime is not None:
        found["lifetime"] = lifetime
    return found


def lifetime_row(passed: float, failed: float, declared: float = 0.05) -> LifetimeRow:
    return {
        "scenario": "one cell at its bar, the others certain to pass",
        "policy": "honest",
        "policy_text": "re-run every inconclusive attempt while attempts are left",
        "pass": passed,
        "fail": failed,
        "attempts": 1.5,
        "half_width_95": {
            "pass": wilson_half_width(passed, DRAWS),
            "fail": wilson_half_width(failed, DRAWS),
        },
        "declared": declared,
    }


def error_warnings(found: GateCharacteristic) -> list[str]:
    return [w for w in _warnings([], found, 0.8, declared=DECLARED) if "declared" in w]


def test_an_at_bar_row_within_the_declared_rate_gives_no_warning():
    assert error_warnings(gate(outcome(0.001, 0.024))) == []


def test_an_at_bar_fail_row_above_the_declared_rate_by_more_than_its_half_width_warns():
    width = wilson_half_width(0.0315, DRAWS)
    assert 0.0315 - width > DECLARED  # 3.15 % +- 0.24 %
    (warning,) = error_warnings(gate(outcome(0.001, 0.0315)))
    assert "every clause exactly at its bar" in warning and "fails 3.15%" in warning
    assert f"+- {width:.2%}" in warning and "declared 2.50%" in warning


def test_an_at_bar_row_above_the_declared_rate_by_less_than_its_half_width_does_not_warn():
    assert 0.027 - wilson_half_width(0.027, DRAWS) < DECLARED < 0.027
    assert error_warnings(gate(outcome(0.027, 0.027))) == []


def test_the_at_bar_pass_row_is_held_to_the_same_rate():
    (warning,) = error_warnings(gate(outcome(0.04, 0.01)))
    assert "passes 4.00%" in warning and "declared 2.50%" in warning


def test_a_lifetime_row_above_its_own_declared_rate_warns_naming_scenario_and_policy():
    rows = [lifetime_row(0.045, 0.004), lifetime_row(0.052, 0.004), lifetime_row(0.08, 0.004)]
    warnings = error_warnings(gate(outcome(0.001, 0.02), rows))
    assert len(warnings) == 1  # 4.5 % is under 5 %; 5.2 % +- 0.3 % is within its error
    assert warnings[0].startswith("one cell at its bar, the others certain to pass, re-run")
    assert "whole engagement" in warnings[0] and "passes 8.00%" in warnings[0]
    assert "declared 5.00%" in warnings[0]


def test_a_simulated_one_cell_spec_holds_its_rate_and_gives_no_error_warning():
    spec = g3_spec(statistics={"attempts": 2, "sd_floor": 0.01, "noise_cv_pct": 10})
    spec["clauses"][0]["claimed_pct"] = 40
    oc = operating_characteristic(spec, gates=4000, seed=7, lifetime=False)
    assert oc["available"]
    assert oc["gate"]["at_bars"]["fail"] < 0.04
    assert not [w for w in oc["warnings"] if "declared" in w]
