"""G2 functional integration: health, greedy equivalence, offload hit rate, A/A noise floor."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.decisions import EvidenceError, decide_g2
from tests.gates.decisions.test_g3 import valid

PROMPTS = ["p0", "p1", "p2", "p3"]


def g2_spec(**noise) -> dict:
    floor = {
        "repetitions": 4,
        "metric": "ttft_p50",
        "max_noise_pct": 10.0,
        "tier": 8,
        "workload": {
            "dataset": "random",
            "input_len": 64,
            "output_len": 8,
            "num_prompts": 8,
            "seed": 1,
        },
    }
    floor.update(noise)
    spec = {
        "gate": "G2",
        "version": 2,
        "health": {"timeout_s": 900},
        "equivalence": {"prompts": PROMPTS, "max_tokens": 16, "max_mismatch_pct": 0.0},
        "offload_hit": {
            "min_external_hit_rate": 0.2,
            "tier": 8,
            "workload": {
                "dataset": "random",
                "input_len": 64,
                "output_len": 8,
                "num_prompts": 8,
                "seed": 1,
            },
        },
        "noise_floor": floor,
        "stop_loss": {"max_attempts": 2},
    }
    return valid("G2", spec)


def run(ttft: float, completed: int = 8) -> dict:
    return {"completed": completed, "failed": 0, "ttft_ms": {"median": ttft}}


def aa_pairs(ratios: list[float]) -> list[dict]:
    return [
        {"repetition": i, "a": run(1000.0 * ratio), "b": run(1000.0)}
        for i, ratio in enumerate(ratios, start=1)
    ]


def observed(**changes) -> dict:
    seen = {
        "health": {"healthy": True, "seconds": 120.0},
        "equivalence": [
            {"prompt": i, "reference": f"out {i}", "offload": f"out {i}"}
            for i in range(len(PROMPTS))
        ],
        "external_hit_rate": 0.45,
        "aa_pairs": aa_pairs([1.01, 0.99, 1.02, 0.985]),
    }
    seen.update(changes)
    return seen


def row(result: dict, check: str) -> dict:
    return next(item for item in result["clauses"] if item["check"] == check)


def test_a_healthy_equivalent_offload_with_a_quiet_noise_floor_passes():
    result = decide_g2(g2_spec(), observed())
    assert result["verdict"] == "pass"
    json.dumps(result, allow_nan=False)


def test_the_noise_floor_is_the_half_width_of_the_aa_interval_in_percent():
    ratios = [1.01, 0.99, 1.02, 0.985]
    noise = row(decide_g2(g2_spec(), observed()), "noise_floor")
    logs = np.log(ratios)
    half = 2.3533634348018264 * logs.std(ddof=1) / 2  # t(0.95, 3 df) for a 90 % interval, n = 4
    assert noise["noise_pct"] == pytest.approx(100 * (math.exp(half) - 1))
    assert noise["sd_log_ratio"] == pytest.approx(logs.std(ddof=1))
    assert noise["low_ratio"] < 1 < noise["high_ratio"]


def test_a_noise_floor_above_the_limit_fails():
    result = decide_g2(g2_spec(), observed(aa_pairs=aa_pairs([1.3, 0.8, 1.2, 0.75])))
    assert result["verdict"] == "fail"
    assert "exceeds 10 %" in row(result, "noise_floor")["cause"]


def test_a_systematic_aa_difference_beyond_the_floor_fails():
    result = decide_g2(g2_spec(), observed(aa_pairs=aa_pairs([1.15, 1.16, 1.15, 1.155])))
    assert row(result, "noise_floor")["verdict"] == "fail"
    assert "differ by more than the floor" in row(result, "noise_floor")["cause"]


def test_a_small_precisely_measured_aa_bias_inside_the_floor_passes():
    # Interval around +1 % excludes 1, yet both identical arms agree within the 10 % floor.
    result = decide_g2(g2_spec(), observed(aa_pairs=aa_pairs([1.009, 1.011, 1.010, 1.012])))
    assert row(result, "noise_floor")["verdict"] == "pass"


def test_fewer_aa_repetitions_than_the_spec_asks_are_inconclusive():
    result = decide_g2(g2_spec(), observed(aa_pairs=aa_pairs([1.01, 0.99, 1.0])))
    assert row(result, "noise_floor")["verdict"] == "inconclusive"
    assert row(result, "noise_floor")["cause"] == "3 of 4 A/A repetitions usable"


def test_an_aa_run_without_completed_requests_is_invalid():
    pairs = aa_pairs([1.01, 0.99, 1.02, 0.985])
    pairs[1]["b"]["completed"] = 0
    result = decide_g2(g2_spec(), observed(aa_pairs=pairs))
    assert result["verdict"] == "invalid"


def test_a_server_that_never_became_healthy_fails():
    result = decide_g2(g2_spec(), observed(health={"healthy": False, "seconds": None}))
    assert result["verdict"] == "fail"
    assert result["reasons"] == ["health: the offload server did not become healthy within 900 s"]


def test_a_different_greedy_output_fails_the_equivalence_check():
    outputs = observed()["equivalence"]
    outputs[2]["offload"] = "something else"
    equivalence = row(decide_g2(g2_spec(), observed(equivalence=outputs)), "equivalence")
    assert equivalence["verdict"] == "fail" and equivalence["mismatched"] == [2]
    assert equivalence["mismatch_pct"] == 25.0


def test_missing_prompts_are_inconclusive_unless_the_mismatches_already_fail():
    outputs = observed()["equivalence"][:3]
    assert row(decide_g2(g2_spec(), observed(equivalence=outputs)), "equivalence")["verdict"] == (
        "inconclusive"
    )
    outputs[0]["offload"] = "drifted"
    assert row(decide_g2(g2_spec(), observed(equivalence=outputs)), "equivalence")["verdict"] == (
        "fail"
    )


def test_an_offload_tier_that_is_not_hit_fails_and_an_unknown_rate_is_inconclusive():
    assert (
        row(decide_g2(g2_spec(), observed(external_hit_rate=0.05)), "offload_hit")["verdict"]
        == "fail"
    )
    assert decide_g2(g2_spec(), observed(external_hit_rate=None))["verdict"] == "inconclusive"


def test_a_bad_observation_names_the_field():
    with pytest.raises(EvidenceError) as caught:
        decide_g2(g2_spec(), observed(equivalence=[{"prompt": 9, "reference": "", "offload": ""}]))
    assert caught.value.field == "observed.equivalence"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["health", "equivalence", "external_hit_rate", "aa_pairs"]), json_values
    )
)
def test_any_observation_gives_a_verdict_or_an_evidence_error(damage):
    try:
        result = decide_g2(g2_spec(), observed(**damage))
    except EvidenceError as error:
        assert error.field.startswith("observed")
        return
    assert result["verdict"] in ("pass", "fail", "inconclusive", "invalid") and result["reasons"]


def band(low: float = 0.3, high: float = 0.5, tier: int = 8) -> dict:
    return {"replay_external_band": {"tier": tier, "band": [low, high]}}


@pytest.mark.parametrize(
    ("rate", "position", "row_verdict", "words"),
    [
        (0.4, "within", "pass", "within the planner's band 30.0% to 50.0% at c=8"),
        (0.3, "within", "pass", "within"),  # the ends belong to the band
        (0.25, "below", "inconclusive", "a warning to both parties before G3, not a G2 failure"),
        (0.6, "above", "pass", "a model error in the tier's favour"),
    ],
)
def test_a_replayed_hit_cell_is_within_below_or_above_the_planners_band(
    rate, position, row_verdict, words
):
    result = decide_g2(g2_spec(), observed(external_hit_rate=rate), band())
    found = row(result, "replay_band")
    assert (found["position"], found["verdict"], found["advisory"]) == (position, row_verdict, True)
    assert words in found["cause"] and f"{rate:.1%}" in found["cause"]
    assert (found["band_low"], found["band_high"], found["external_hit_rate"]) == (0.3, 0.5, rate)
    assert (found["expected"], found["observed"]) == ("30.0% to 50.0%", f"{rate:.1%} ({position})")
    # The band is a model's prediction: it never decides G2, whatever side the rate is on.
    assert result["verdict"] == "pass"
    assert result["inputs"]["context"] == band()
    warned = [note for note in result["notes"] if note.startswith("replay_band: ")]
    assert len(warned) == (0 if position == "within" else 1)
    assert any("below the planner's band" in r for r in result["reasons"]) == (position == "below")


def test_a_band_below_is_a_reason_beside_a_failed_check_without_changing_the_verdict():
    failing = observed(external_hit_rate=0.1, aa_pairs=aa_pairs([1.3, 0.8, 1.2, 0.75]))
    result = decide_g2(g2_spec(), failing, band())
    assert result["verdict"] == "fail"
    assert result["reasons"][-1].startswith("replay_band: external hit rate 10.0%")


@pytest.mark.parametrize(
    ("context", "rate", "cause"),
    [
        ({"replay_external_band": {"tier": 8, "missing": "no saved KV plan"}}, 0.4, "no saved"),
        (band(), None, "external hit rate was not observed"),
    ],
)
def test_a_band_that_cannot_be_told_says_why_and_warns_no_one(context, rate, cause):
    result = decide_g2(g2_spec(), observed(external_hit_rate=rate), context)
    found = row(result, "replay_band")
    assert found["verdict"] == "inconclusive" and cause in found["cause"]
    assert "position" not in found and result["notes"] == []


def test_without_a_replayed_band_the_decision_is_as_before():
    result = decide_g2(g2_spec(), observed(), {"kv_exceeds_vram": None})
    assert result == decide_g2(g2_spec(), observed())
    assert "notes" not in result and "context" not in result["inputs"]
    assert [item["check"] for item in result["clauses"]] == [
        "health",
        "equivalence",
        "offload_hit",
        "noise_floor",
    ]


@pytest.mark.parametrize(
    ("context", "field"),
    [
        ({"replay_external_band": {"band": [0.1, 0.2]}}, "context.replay_external_band.tier"),
        ({"replay_external_band": {"tier": 8, "band": [0.5, 0.2]}}, "replay_external_band.band"),
        ({"replay_external_band": {"tier": 8, "band": [0.1]}}, "replay_external_band.band"),
        ({"replay_external_band": {"tier": 8, "band": ["a", 1]}}, "replay_external_band.band"),
    ],
)
def test_a_malformed_band_is_refused_naming_the_field(context, field):
    with pytest.raises(EvidenceError) as error:
        decide_g2(g2_spec(), observed(), context)
    assert field in error.value.field
