"""A G3 run's predicted TTFT band: None with the reason when an input is unknown, the field's
shape (more saving at higher concurrency and longer prefixes), measured against predicted, and
the demo's engagements: the band holds what simhost measures for their G3 workloads."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gates.demo.world import ENGAGEMENTS, demo_specs
from gates.planner import plan as kv_plan
from gates.planner import preset_for_model_name, preset_model, request_from_dict
from gates.planner.run_band import (
    band_inputs,
    band_inputs_from_dict,
    band_inputs_to_dict,
    gpu_kind,
    measured_against_predicted,
    planner_band_inputs,
    predict_run_band,
    predict_tier,
)
from simhost.engine.predict import SessionWorkload
from simhost.engine.presets import LARGE_480B_TP8
from simhost.host.config import resolve_host_config
from simhost.scenarios import SCENARIOS
from simhost.simulation import run_arm

H100X8 = {"gpu_models": ["NVIDIA H100 80GB HBM3"], "gpu_count": 8}
MODEL = preset_model("qwen3-coder-480b-a35b")
COMPACT = {
    "dataset": "cold_recovery",
    "prefix_len": 6144,
    "suffix_len": 64,
    "output_len": 32,
    "num_prompts": 32,
    "num_prefixes": 16,
}
KV_TOKENS = 4096 * 16  # the compact scenario's GPU KV cache


def spec(workload: dict = COMPACT, tiers: tuple[int, ...] = (16,)) -> dict:
    return {"workload": workload, "tiers": list(tiers)}


def predict(document: dict, kv_tokens: int = KV_TOKENS) -> dict:
    return predict_run_band(band_inputs(document, H100X8, MODEL, kv_tokens, "given"))


@pytest.mark.parametrize(
    ("inventory", "model", "kv_tokens", "workload", "reason"),
    [
        (None, MODEL, KV_TOKENS, COMPACT, "no inventory was accepted at G1"),
        ({**H100X8, "gpu_models": ["Gaudi 3"]}, MODEL, KV_TOKENS, COMPACT, "no figures for"),
        ({**H100X8, "gpu_models": ["H100", "H200"]}, MODEL, KV_TOKENS, COMPACT, "no figures"),
        ({**H100X8, "gpu_count": None}, MODEL, KV_TOKENS, COMPACT, "does not count the GPUs"),
        (H100X8, None, KV_TOKENS, COMPACT, "names no planner preset"),
        (H100X8, preset_model("deepseek-v3"), KV_TOKENS, COMPACT, "not MLA"),
        (H100X8, MODEL, None, COMPACT, "GPU KV cache size is unknown"),
        (H100X8, MODEL, KV_TOKENS, {"dataset": "sharegpt"}, "a sharegpt workload is not"),
        (H100X8, MODEL, KV_TOKENS, {"dataset": "cold_recovery"}, "lacks a length"),
    ],
)
def test_an_unknown_input_predicts_nothing_and_says_why(
    inventory, model, kv_tokens, workload, reason
):
    prediction = predict_run_band(band_inputs(spec(workload), inventory, model, kv_tokens, "x"))
    assert prediction["predicted"] is None
    assert reason in prediction["reason"]


def test_the_gpu_is_read_from_the_inventory_never_guessed():
    assert gpu_kind(H100X8) == "H100-SXM5-80GB"
    assert gpu_kind({"gpu_models": ["AMD Instinct MI300X"]}) == "MI300X"
    assert gpu_kind({"gpu_models": ["Tesla T4"]}) is None


def test_offload_saves_more_at_higher_concurrency_and_with_longer_prefixes():
    by_tier = predict(spec(tiers=(4, 16)))["predicted"]
    assert by_tier[1]["low"] < by_tier[0]["low"] and by_tier[1]["high"] < by_tier[0]["high"]
    assert by_tier[1]["high"] < 0  # a saving, at the slow end too
    short = predict(spec({**COMPACT, "prefix_len": 1536}))["predicted"][0]
    long = predict(spec())["predicted"][0]
    assert long["high"] < short["high"] and long["low"] < short["low"]


def test_the_assumptions_are_said_in_words():
    prediction = predict(spec())
    assert "50 % to 100 % of the host links' DMA speed" in prediction["assumes"]
    assert "65,536 tokens of GPU KV cache (given)" in prediction["assumes"]
    assert "16 sessions of a 6,144-token prefix" in prediction["assumes"]


# The planner page's band: Llama 3.1 70B on 2 x 80 GiB leaves about 41k tokens of KV.
PLANNED = {"model": "llama-3.1-70b", "gpus": 2, "gpu_mem_gib": 80, "concurrency": 16}
SESSIONS = SessionWorkload(sessions=16, prefix=6144, suffix=64, output=32, resumes=1)


def planned_inputs(tiers: tuple[int, ...] = (4, 16), **fields: object):
    request = request_from_dict({**PLANNED, "context_tokens": 8000, **fields})
    return planner_band_inputs(request, kv_plan(request), "H100-SXM5-80GB", SESSIONS, tiers)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"tensor_parallel_size": 1}, "this plan has 2 replicas of tensor parallel 1"),
        ({"kv_dtype": "fp8"}, "fp8 KV with bf16 weights is not modelled"),
        ({"weight_dtype": "fp8"}, "bf16 KV with fp8 weights is not modelled"),
        ({"model": "deepseek-v3", "gpus": 8, "gpu_mem_gib": 141}, "K/V heads (not MLA)"),
    ],
)
def test_the_planners_band_says_what_the_model_cannot_take(fields, reason):
    found = planned_inputs(**fields)
    assert isinstance(found, str) and reason in found


def test_the_planners_band_runs_on_the_plans_kv_capacity_and_keeps_its_inputs_as_json():
    inputs = planned_inputs()
    assert not isinstance(inputs, str)
    assert inputs.gpus == 2 and 40_000 < inputs.kv_tokens < 42_000
    assert inputs.kv_source == "the KV planner's capacity for these inputs"
    stored = band_inputs_to_dict(inputs)
    assert band_inputs_from_dict(stored) == inputs
    assert band_inputs_to_dict(band_inputs_from_dict(stored)) == stored
    tiers = [predict_tier(inputs, concurrency) for concurrency in inputs.tiers]
    assert predict_run_band(inputs)["predicted"] == tiers  # one band, tier by tier or at once
    assert all(tier["high"] < 0 for tier in tiers)  # 16 x 6k sessions overflow 41k tokens


PREDICTION = {
    "predicted": [
        {"concurrency": 8, "low": -0.30, "high": -0.18},
        {"concurrency": 16, "low": -0.4, "high": -0.2},
    ]
}


def ttft_cell(tier: int, ratio: float) -> dict:
    return {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "tier": tier,
        "ratio": {"estimate": ratio},
    }


def test_a_measurement_outside_the_band_is_a_note_not_a_verdict():
    rows = measured_against_predicted(PREDICTION, [ttft_cell(8, 0.59), ttft_cell(16, 0.7)])
    outside, inside = rows
    assert outside["inside"] is False and "verdict" not in outside
    assert outside["note"] == (
        "measured -41 % at c=8, outside the predicted -30 % to -18 %: the model or the host differ"
    )
    assert inside["inside"] is True and inside["note"] == "" and inside["measured_text"] == "-30 %"


def test_before_a_decision_nothing_is_measured_and_other_clauses_are_not_read():
    throughput = {**ttft_cell(8, 0.5), "metric": "output_throughput"}
    rows = measured_against_predicted(PREDICTION, [throughput])
    assert [(row["measured"], row["inside"]) for row in rows] == [(None, None), (None, None)]
    assert measured_against_predicted({"predicted": None, "reason": "x"}, []) == []


def simhost_measured(workload: dict, scenario: str, concurrency: int) -> float:
    """simhost's own offload vs resident TTFT p50 change for a G3 workload (virtual time)."""
    if workload["dataset"] == "random":
        bench = {"dataset_name": "random", "random_input_len": workload["input_len"]}
        bench["random_output_len"] = workload["output_len"]
    else:
        bench = {"dataset_name": "cold_recovery"}
        bench["prefix_repetition_prefix_len"] = workload["prefix_len"]
        bench["prefix_repetition_suffix_len"] = workload["suffix_len"]
        bench["prefix_repetition_output_len"] = workload["output_len"]
        bench["prefix_repetition_num_prefixes"] = workload["num_prefixes"]
    bench.update(num_prompts=workload["num_prompts"], seed=workload["seed"])
    host = resolve_host_config(None, None, {})
    served = replace(SCENARIOS[scenario], bench=bench)
    resident = run_arm(served, "resident", host, concurrency).ttft_median()
    return run_arm(served, "offload", host, concurrency).ttft_median() / resident - 1


@pytest.mark.parametrize("plan", ENGAGEMENTS, ids=lambda plan: plan.expected_g3)
def test_the_demos_predicted_band_holds_what_simhost_measures_at_each_tier(plan):
    """The band a demo G3 run records (its host's inventory, the model its engagement names and
    the cache size its G2 server reported) against simhost's measurement of the same workload.
    The engagement names the model its host serves: the scenario's 480B preset, whose shape is
    the planner preset's, so the planner and simhost predict and measure the same model."""
    scenario = SCENARIOS[plan.scenario]
    assert scenario.serve["model_preset"] == LARGE_480B_TP8.name
    model = preset_model(preset_for_model_name(plan.model_name) or "")
    shape = LARGE_480B_TP8.shape
    assert (model.layers, model.heads, model.kv_heads, model.head_dim) == (
        shape.layers,
        shape.heads,
        shape.kv_heads,
        shape.head_dim,
    ), plan.model_name
    kv_tokens = int(scenario.serve["num_gpu_blocks_override"]) * 16
    document = demo_specs(plan)["G3"]
    prediction = predict_run_band(band_inputs(document, H100X8, model, kv_tokens, "reported"))
    for tier in prediction["predicted"]:
        measured = simhost_measured(document["workload"], plan.scenario, tier["concurrency"])
        assert tier["low"] <= measured <= tier["high"], (tier, measured)
