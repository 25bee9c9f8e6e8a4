"""The planner linked to engagements and G3 specs, on hand-computed cases. Pure: no database
(kvplans reads only an engagement's `kv_plan` and `model_name`, so a stand-in object does)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.planner import PlannerError, preset_for_model_name
from gates.planner.spec_check import (
    engagement_plan_inputs,
    engagement_plan_request,
    inputs_with_overrides,
    spec_kv_warning,
    spec_workload,
    spec_workload_exceeds_vram,
    workload_distinct_prefixes,
)

G3_TEMPLATE = json.loads(
    (Path(__file__).resolve().parents[3] / "gates" / "specs" / "templates" / "G3.json").read_text()
)
# Llama 3.1 70B, bf16, TP 8 on 8 x 80 GiB: 40,960 KV bytes per token per GPU and
# 80 GiB x 0.9 - 141,107,412,992 / 8 = 59,670,984,704 bytes of KV capacity per GPU.
LLAMA_8X80 = {
    "model": "llama-3.1-70b",
    "gpus": 8,
    "gpu_mem_gib": 80,
    "concurrency": 16,
    "context_tokens": 32768,
}


def engagement(kv_plan: dict | None = None, model_name: str = "m") -> Any:
    return SimpleNamespace(kv_plan=kv_plan or {}, model_name=model_name)


def g3(workload: dict | None = None, tiers: list[int] | None = None, **top: Any) -> dict:
    spec = copy.deepcopy(G3_TEMPLATE)
    spec["workload"].update(workload or {})
    if tiers is not None:
        spec["tiers"] = tiers
    spec.update(top)
    return spec


def test_the_default_cold_recovery_workload_overflows_8_x_80_gib():
    # 64 sessions keep their 32,000-token prefix: 64 x 32,000 x 40,960 = 83,886,080,000, plus
    # 16 in flight x (512 + 256) x 40,960 = 503,316,480: 84,389,396,480 > 59,670,984,704.
    assert spec_workload_exceeds_vram(engagement(LLAMA_8X80), G3_TEMPLATE) is True


def test_the_same_workload_fits_in_8_x_192_gib_and_the_page_is_warned():
    # floor(192 GiB x 0.9) - 17,638,426,624 = 167,904,160,563 >= 84,389,396,480.
    roomy = engagement({**LLAMA_8X80, "gpu_mem_gib": 192})
    assert spec_workload_exceeds_vram(roomy, G3_TEMPLATE) is False
    warning = spec_kv_warning(roomy, G3_TEMPLATE)
    assert "never exercised" in warning and "156.4 GiB of KV per GPU" in warning


def test_prefix_repetition_counts_vllm_bench_default_ten_prefixes():
    # 10 x 1,310,720,000 + 16 x 31,457,280 = 13,610,516,480: fits in 59,670,984,704.
    spec = g3({"cold_recovery": False})
    assert spec_workload(spec).distinct_prefixes == 10
    assert spec_workload_exceeds_vram(engagement(LLAMA_8X80), spec) is False


def test_a_random_workload_shares_nothing_and_scales_with_the_top_tier():
    # 64 x (32,000 + 768) x 40,960 = 85,899,345,920 > capacity; 32 of them fit (42.9 GB).
    workload = {"dataset": "random", "input_len": 32000, "output_len": 768, "num_prompts": 64}
    plan = engagement(LLAMA_8X80)
    assert spec_workload_exceeds_vram(plan, g3(workload, tiers=[16, 64])) is True
    assert spec_workload_exceeds_vram(plan, g3(workload, tiers=[16, 32])) is False


def test_the_spec_server_block_sets_tensor_parallelism_and_memory_utilization():
    random = {"dataset": "random", "input_len": 32000, "output_len": 768, "num_prompts": 64}
    plan = engagement(LLAMA_8X80)
    # TP 4 on 4 GPUs: 81,920 bytes per token per GPU, 77,309,411,328 - 35,276,853,248 =
    # 42,032,558,080 of capacity; 16 x 32,768 x 81,920 = 42,949,672,960 overflows it.
    assert spec_workload_exceeds_vram(plan, g3(random, tiers=[16])) is False
    assert spec_workload_exceeds_vram(
        plan, g3(random, tiers=[16], server={"tensor_parallel_size": 4})
    )
    # --gpu-memory-utilization 0.3: 24 GiB - 17,638,426,624 = 8,131,377,152 < 13,610,516,480.
    prefixes = g3({"cold_recovery": False})
    assert spec_workload_exceeds_vram(plan, prefixes) is False
    assert spec_workload_exceeds_vram(plan, {**prefixes, "server": {"gpu_memory_utilization": 0.3}})


def test_tiers_above_the_prompt_count_never_have_more_requests_in_flight():
    assert spec_workload(g3({"num_prompts": 8}, tiers=[4, 8, 16])).concurrency == 8
    assert spec_workload(g3(tiers=[4, 8, 16])).concurrency == 16


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        ({"dataset": "cold_recovery", "num_prompts": 40}, 40),
        ({"dataset": "prefix_repetition", "cold_recovery": True, "num_prompts": 40}, 40),
        ({"dataset": "prefix_repetition", "num_prompts": 40}, 10),
        ({"dataset": "prefix_repetition", "num_prompts": 4}, 4),
        ({"dataset": "prefix_repetition", "num_prompts": 40, "num_prefixes": 25}, 25),
        ({"dataset": "prefix_repetition"}, None),
    ],
)
def test_distinct_prefixes_follow_the_dataset(workload, expected):
    assert workload_distinct_prefixes(workload) == expected


@pytest.mark.parametrize(
    "workload",
    [
        {"dataset": "sharegpt"},
        {"prefix_len": None},
        {"output_len": "long"},
        {"dataset": "random", "input_len": None},
    ],
)
def test_a_workload_without_the_numbers_is_unknown(workload):
    spec = g3()
    spec["workload"].update(workload)
    spec["workload"] = {k: v for k, v in spec["workload"].items() if v is not None}
    assert spec_workload(spec) is None
    assert spec_workload_exceeds_vram(engagement(LLAMA_8X80), spec) is None


def test_no_saved_inputs_is_unknown_and_warned_only_when_the_spec_requires_it():
    assert spec_workload_exceeds_vram(engagement(), G3_TEMPLATE) is None
    assert "No planner inputs are saved" in spec_kv_warning(engagement(), G3_TEMPLATE)
    relaxed = g3(validity={**G3_TEMPLATE["validity"], "require_kv_exceeds_vram": False})
    assert spec_kv_warning(engagement(), relaxed) == ""


def test_saved_inputs_that_no_longer_validate_are_unknown_and_say_why():
    stale = engagement({**LLAMA_8X80, "model": "llama-9-900b"})
    assert spec_workload_exceeds_vram(stale, G3_TEMPLATE) is None
    assert "do not validate: model: unknown model" in spec_kv_warning(stale, G3_TEMPLATE)
    with pytest.raises(PlannerError):
        engagement_plan_request(stale)


def test_an_overflowing_workload_needs_no_warning():
    assert spec_kv_warning(engagement(LLAMA_8X80), G3_TEMPLATE) == ""


def test_the_plan_request_comes_from_the_saved_inputs():
    assert engagement_plan_request(engagement()) is None
    request = engagement_plan_request(engagement(LLAMA_8X80))
    assert request.deployment.gpus == 8 and request.concurrency == 16
    assert request.deployment.model.name == "llama-3.1-70b"


def test_inputs_start_from_the_saved_ones_else_the_preset_named_by_the_model():
    assert engagement_plan_inputs(engagement(LLAMA_8X80)) == LLAMA_8X80
    named = engagement(model_name="meta-llama/Llama-3.3-70B-Instruct")
    assert engagement_plan_inputs(named) == {"model": "llama-3.1-70b"}
    assert engagement_plan_inputs(engagement(model_name="my-own-model")) == {}


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("Qwen/Qwen3-32B-AWQ", "qwen3-32b"),
        ("qwen3-coder-480b-a35b-instruct-fp8", "qwen3-coder-480b-a35b"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-v3"),
        ("DeepSeek-V3.1-Terminus", "deepseek-v3"),
        ("llama-3.1-8b", "llama-3.1-8b"),
        ("llama-3.1-80b", None),
        ("DeepSeek-V3.2-Exp", None),
        ("", None),
    ],
)
def test_a_served_model_name_matches_a_preset_only_at_a_word_boundary(name, preset):
    assert preset_for_model_name(name) == preset


def test_overrides_replace_the_model_and_config_together():
    base = {"config": {"num_hidden_layers": 2}, "gpus": 8, "concurrency": 4}
    merged = inputs_with_overrides(base, {"model": "llama-3.1-8b", "concurrency": 8, "gpus": None})
    assert merged == {"model": "llama-3.1-8b", "gpus": 8, "concurrency": 8}
    assert inputs_with_overrides(base, {"gpus": 4})["config"] == {"num_hidden_layers": 2}


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.integers(0, 200_000),
    longer=st.integers(0, 200_000),
    prompts=st.integers(1, 200),
    tier=st.integers(1, 64),
)
def test_a_longer_prefix_never_turns_an_overflow_into_a_fit(prefix, longer, prompts, tier):
    plan = engagement(LLAMA_8X80)
    short = g3({"prefix_len": prefix, "num_prompts": prompts}, tiers=[tier])
    long = g3({"prefix_len": prefix + longer, "num_prompts": prompts}, tiers=[tier])
    if spec_workload_exceeds_vram(plan, short):
        assert spec_workload_exceeds_vram(plan, long)


def test_a_server_block_the_model_cannot_run_on_is_unknown_and_says_why():
    spec = g3(server={"tensor_parallel_size": 3})
    assert spec_workload_exceeds_vram(engagement(LLAMA_8X80), spec) is None
    warning = spec_kv_warning(engagement(LLAMA_8X80), spec)
    assert "cannot be sized on this deployment: tensor_parallel_size" in warning
