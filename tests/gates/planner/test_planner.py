"""The KV headroom planner: hand-computed KV sizes, capacity, the recommendation and bad input."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.planner import (
    GIB,
    Deployment,
    PlannerError,
    PlanRequest,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    kv_capacity_per_gpu,
    kv_demand_per_gpu,
    max_concurrency_at,
    max_context_at,
    model_from_config,
    plan,
    preset_model,
    preset_names,
    request_from_dict,
    sequence_bytes_per_gpu,
    workload_exceeds_vram,
)

# KV-relevant keys of the public config.json files the presets were copied from.
LLAMA_31_70B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "n_routed_experts": 256,
    "num_attention_heads": 128,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
QWEN3_CODER_480B = {
    "model_type": "qwen3_moe",
    "head_dim": 128,
    "hidden_size": 6144,
    "max_position_embeddings": 262144,
    "num_attention_heads": 96,
    "num_experts": 160,
    "num_hidden_layers": 62,
    "num_key_value_heads": 8,
    "sliding_window": None,
    "use_sliding_window": False,
}
GPT_OSS_120B = {
    "model_type": "gpt_oss",
    "head_dim": 64,
    "hidden_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "sliding_window": 128,
}
MIXTRAL_8X7B = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "sliding_window": None,
}
QWEN3_32B = {
    "model_type": "qwen3",
    "head_dim": 128,
    "hidden_size": 5120,
    "layer_types": ["full_attention"] * 64,
    "max_position_embeddings": 40960,
    "num_attention_heads": 64,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "sliding_window": None,
    "use_sliding_window": False,
}


def deployment(model: str = "llama-3.1-70b", **overrides: Any) -> Deployment:
    fields = {"gpus": 8, "gpu_mem_gib": 80.0, **overrides}
    return Deployment(model=preset_model(model), **fields)


def request(**fields: Any) -> dict[str, Any]:
    base = {
        "model": "llama-3.1-70b",
        "gpus": 8,
        "gpu_mem_gib": 80,
        "concurrency": 64,
        "context_tokens": 32000,
    }
    return {**base, **fields}


def test_a_llama_3_70b_class_model_needs_327680_bytes_per_token_in_bf16() -> None:
    # 80 layers x 8 KV heads x 128 head dim x 2 (K and V) x 2 bytes
    assert kv_bytes_per_token(preset_model("llama-3.1-70b"), "bf16") == 327_680
    assert kv_bytes_per_token(model_from_config(LLAMA_31_70B), "bf16") == 327_680


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2", "FP8"])
def test_fp8_kv_halves_the_bf16_size(dtype: str) -> None:
    assert kv_bytes_per_token(preset_model("llama-3.1-70b"), dtype) == 163_840


def test_fp32_doubles_it_and_fp16_matches_bf16() -> None:
    model = preset_model("llama-3.1-70b")
    assert kv_bytes_per_token(model, "fp32") == 655_360
    assert kv_bytes_per_token(model, "fp16") == 327_680


def test_an_mla_model_caches_one_latent_per_layer_not_k_and_v_per_head() -> None:
    model = model_from_config(DEEPSEEK_V3)
    # 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes; num_key_value_heads ignored
    assert model.mla_latent_dim == 576
    assert kv_bytes_per_token(model, "bf16") == 70_272
    assert kv_bytes_per_token(model, "fp8") == 35_136


def test_an_explicit_head_dim_wins_over_hidden_size_divided_by_heads() -> None:
    # Qwen3-Coder: 6144 / 96 would be 64, but the config says 128.
    model = model_from_config(QWEN3_CODER_480B)
    assert model.head_dim == 128
    assert kv_bytes_per_token(model) == 62 * 8 * 128 * 2 * 2 == 253_952


def test_absent_kv_heads_mean_full_multi_head_attention() -> None:
    llama_2_7b = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}
    model = model_from_config(llama_2_7b)
    assert (model.kv_heads, model.head_dim) == (32, 128)
    assert kv_bytes_per_token(model) == 32 * 32 * 128 * 2 * 2 == 524_288


def test_a_multimodal_config_is_read_through_its_text_config() -> None:
    wrapper = {"model_type": "llava", "vision_config": {"hidden_size": 1024}}
    model = model_from_config({**wrapper, "text_config": LLAMA_31_70B})
    assert kv_bytes_per_token(model) == 327_680


def test_sliding_window_layers_hold_only_the_window() -> None:
    oss = deployment("gpt-oss-120b", tensor_parallel_size=1)
    per_layer = 8 * 64 * 2 * 2
    assert sequence_bytes_per_gpu(oss, 32_000) == per_layer * (18 * 32_000 + 18 * 128)
    assert sequence_bytes_per_gpu(oss, 100) == per_layer * 36 * 100
    parsed = model_from_config(GPT_OSS_120B)
    assert (parsed.sliding_window, parsed.sliding_layers, parsed.layers) == (128, 18, 36)


def test_a_stale_sliding_window_without_layer_types_counts_full_attention_and_says_so() -> None:
    model = model_from_config({**MIXTRAL_8X7B, "sliding_window": 4096})
    assert model.sliding_layers == 0
    assert "upper bound" in model.notes[0]
    assert model_from_config({**QWEN3_32B, "sliding_window": 4096}).notes == ()


def test_layers_with_a_fixed_recurrent_state_cache_no_kv() -> None:
    hybrid = {
        **QWEN3_32B,
        "num_hidden_layers": 8,
        "layer_types": ["linear_attention"] * 6 + ["full_attention"] * 2,
    }
    model = model_from_config(hybrid)
    assert model.layers == 2
    assert kv_bytes_per_token(model) == 2 * 8 * 128 * 2 * 2


@pytest.mark.parametrize(
    ("preset", "config"),
    [
        ("llama-3.1-70b", LLAMA_31_70B),
        ("deepseek-v3", DEEPSEEK_V3),
        ("qwen3-coder-480b-a35b", QWEN3_CODER_480B),
        ("gpt-oss-120b", GPT_OSS_120B),
        ("mixtral-8x7b", MIXTRAL_8X7B),
        ("qwen3-32b", QWEN3_32B),
    ],
)
def test_each_preset_agrees_with_its_config_json(preset: str, config: dict[str, Any]) -> None:
    from_preset, from_config = preset_model(preset), model_from_config(config)
    assert kv_bytes_per_token(from_preset) == kv_bytes_per_token(from_config)
    assert sequence_bytes_per_gpu(
        Deployment(model=from_preset, gpus=1, gpu_mem_gib=80), 50_000
    ) == sequence_bytes_per_gpu(Deployment(model=from_config, gpus=1, gpu_mem_gib=80), 50_000)
    assert from_preset.max_context == from_config.max_context


def test_every_preset_loads_and_aliases_resolve() -> None:
    assert len(preset_names()) >= 6
    for name in preset_names():
        assert preset_model(name).layers > 0
    assert preset_model("llama-3.3-70b") == preset_model("llama-3.1-70b")


def test_kv_heads_split_across_tensor_parallel_ranks() -> None:
    assert kv_bytes_per_token_per_gpu(deployment(tensor_parallel_size=8)) == 40_960
    assert kv_bytes_per_token_per_gpu(deployment(tensor_parallel_size=2)) == 163_840


def test_kv_heads_replicate_when_tensor_parallelism_exceeds_them() -> None:
    # Qwen3-235B has 4 KV heads: at TP 8 each rank holds one, so every head is stored twice.
    qwen = deployment("qwen3-235b-a22b", tensor_parallel_size=8)
    assert kv_bytes_per_token_per_gpu(qwen) == 94 * 1 * 128 * 2 * 2
    assert 8 * kv_bytes_per_token_per_gpu(qwen) == 2 * kv_bytes_per_token(qwen.model)


def test_the_mla_latent_is_cached_whole_on_every_rank() -> None:
    assert kv_bytes_per_token_per_gpu(deployment("deepseek-v3", gpu_mem_gib=141)) == 70_272


def test_capacity_is_what_the_reserve_and_the_weight_share_leave() -> None:
    # 80 GiB x 0.9 minus 70,553,706,496 params x 2 bytes / 8 GPUs
    assert kv_capacity_per_gpu(deployment()) == 77_309_411_328 - 17_638_426_624


def test_given_weight_bytes_or_weight_dtype_override_the_preset() -> None:
    given = deployment(weight_bytes=8 * 10 * GIB)
    assert kv_capacity_per_gpu(given) == 77_309_411_328 - 10 * GIB
    fp8 = deployment(weight_dtype="fp8")
    assert kv_capacity_per_gpu(fp8) == 77_309_411_328 - 8_819_213_312


def test_data_parallel_replicas_share_the_concurrency_rounded_up() -> None:
    four_replicas = deployment("llama-3.1-8b", tensor_parallel_size=2)
    per_sequence = sequence_bytes_per_gpu(four_replicas, 1000)
    assert kv_demand_per_gpu(four_replicas, 10, 1000) == 3 * per_sequence


def test_the_worked_example_in_the_docs() -> None:
    result = plan(request_from_dict(request(reuse_ratio=0.8)))
    assert result.kv_demand_per_gpu_bytes == 64 * 32_000 * 40_960 == 83_886_080_000
    assert result.kv_capacity_per_gpu_bytes == 59_670_984_704
    assert result.fits is False
    assert result.headroom_bytes == 8 * (59_670_984_704 - 83_886_080_000)
    assert result.boundary.max_concurrency_at_context == 45
    assert result.boundary.max_context_at_concurrency == 22_762
    assert result.recommendation == "offload_worth_testing"
    assert result.offload_capacity_needed_bytes == result.kv_demand_bytes
    assert math.isclose(result.offload_saving_share, 0.8 * (1 - 59_670_984_704 / 83_886_080_000))


def test_a_workload_that_fits_keeps_kv_resident() -> None:
    result = plan(request_from_dict(request(model="llama-3.1-8b", concurrency=8, reuse_ratio=0.9)))
    assert result.fits and result.headroom_bytes > 0
    assert result.recommendation == "keep_resident"
    assert result.offload_capacity_needed_bytes == 0
    assert result.offload_saving_share == 0
    assert any("keep KV resident" in reason for reason in result.reasons)


def test_overflow_without_reuse_means_offload_will_not_help() -> None:
    result = plan(request_from_dict(request(reuse_ratio=0.0)))
    assert not result.fits
    assert result.recommendation == "offload_will_not_help"
    assert any("reuse ratio of 0%" in reason for reason in result.reasons)


def test_weights_that_do_not_fit_are_not_an_offload_case() -> None:
    result = plan(request_from_dict(request(model="qwen3-coder-480b-a35b", reuse_ratio=0.9)))
    assert result.kv_capacity_per_gpu_bytes == 0
    assert result.recommendation == "offload_will_not_help"
    assert result.boundary.max_concurrency_at_context == 0
    assert any("cannot make the weights fit" in reason for reason in result.reasons)


def test_a_context_beyond_the_model_maximum_is_called_out() -> None:
    result = plan(request_from_dict(request(model="qwen3-32b", context_tokens=65536)))
    assert any("beyond the model's configured maximum" in reason for reason in result.reasons)


def test_to_dict_carries_the_fields_the_api_promises() -> None:
    data = plan(request_from_dict(request())).to_dict()
    promised = {
        "kv_bytes_per_token",
        "kv_demand_bytes",
        "kv_capacity_bytes",
        "fits",
        "headroom_bytes",
        "offload_capacity_needed_bytes",
        "prefill_saving_share",
        "recommendation",
        "reasons",
        "boundary",
    }
    assert promised <= set(data)
    assert set(data["boundary"]) == {"max_concurrency_at_context", "max_context_at_concurrency"}
    assert isinstance(data["reasons"], list)


def test_a_g3_workload_of_long_shared_prefixes_can_fit_while_distinct_ones_overflow() -> None:
    mi300x = deployment("qwen3-coder-480b-a35b", gpu_mem_gib=192)
    shape = {"concurrency": 16, "prefix_tokens": 32_000, "suffix_tokens": 512, "output_tokens": 256}
    assert not workload_exceeds_vram(mi300x, **shape)
    assert not workload_exceeds_vram(mi300x, **shape, distinct_prefixes=10)
    assert workload_exceeds_vram(mi300x, **shape, distinct_prefixes=100)
    assert workload_exceeds_vram(mi300x, **{**shape, "concurrency": 64})


def test_workload_exceeds_vram_refuses_negative_lengths() -> None:
    with pytest.raises(PlannerError) as caught:
        workload_exceeds_vram(
            deployment(), concurrency=4, prefix_tokens=10, suffix_tokens=-1, output_tokens=5
        )
    assert caught.value.field == "suffix_tokens"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"gpus": 0}, "gpus"),
        ({"gpus": -2}, "gpus"),
        ({"gpus": True}, "gpus"),
        ({"gpus": 2.5}, "gpus"),
        ({"context_tokens": -1}, "context_tokens"),
        ({"context_tokens": 0}, "context_tokens"),
        ({"concurrency": 0}, "concurrency"),
        ({"kv_dtype": "int3"}, "kv_dtype"),
        ({"kv_dtype": 8}, "kv_dtype"),
        ({"weight_dtype": "fp6"}, "weight_dtype"),
        ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
        ({"tensor_parallel_size": 16}, "tensor_parallel_size"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
        ({"gpus": 6, "tensor_parallel_size": 6}, "tensor_parallel_size"),
        ({"gpu_mem_gib": 0}, "gpu_mem_gib"),
        ({"gpu_mem_gib": float("nan")}, "gpu_mem_gib"),
        ({"gpu_mem_gib": "80"}, "gpu_mem_gib"),
        ({"reserved_fraction": 1.0}, "reserved_fraction"),
        ({"reserved_fraction": -0.1}, "reserved_fraction"),
        ({"reuse_ratio": 1.5}, "reuse_ratio"),
        ({"weight_bytes": -1}, "weight_bytes"),
        ({"model": "llama-9"}, "model"),
        ({"model": 7}, "model"),
        ({"model": {"layers": 4}}, "model.kv_heads"),
        ({"config": LLAMA_31_70B}, "model"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_input_names_its_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(PlannerError) as caught:
        request_from_dict(request(**fields))
    assert caught.value.field == field


def test_missing_required_fields_are_named() -> None:
    data = request()
    del data["gpu_mem_gib"]
    with pytest.raises(PlannerError) as caught:
        request_from_dict(data)
    assert caught.value.field == "gpu_mem_gib"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ("not a config", "config"),
        ([1, 2], "config"),
        ({"num_attention_heads": 8}, "config.num_hidden_layers"),
        ({"num_hidden_layers": "80", "num_attention_heads": 8}, "config.num_hidden_layers"),
        ({"num_hidden_layers": 80}, "config.num_attention_heads"),
        ({"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 10}, "config.head_dim"),
        ({"num_hidden_layers": 2, "num_attention_heads": 2}, "config.hidden_size"),
        ({**DEEPSEEK_V3, "qk_rope_head_dim": None}, "config.qk_rope_head_dim"),
        ({**GPT_OSS_120B, "layer_types": ["full_attention"]}, "config.layer_types"),
        ({**GPT_OSS_120B, "layer_types": [[1]] * 36}, "config.layer_types"),
        ({**GPT_OSS_120B, "sliding_window": None}, "config.sliding_window"),
        ({"text_config": {"num_hidden_layers": 4}}, "config.text_config.num_attention_heads"),
    ],
)
def test_a_malformed_config_names_the_field(config: Any, field: str) -> None:
    with pytest.raises(PlannerError) as caught:
        model_from_config(config)
    assert caught.value.field == field


def test_a_config_model_needs_its_weight_size() -> None:
    data = {**request(config=LLAMA_31_70B)}
    del data["model"]
    with pytest.raises(PlannerError) as caught:
        plan(request_from_dict(data))
    assert caught.value.field == "weight_bytes"
    result = plan(request_from_dict({**data, "weight_bytes": 141_107_412_992}))
    assert result.kv_capacity_per_gpu_bytes == 59_670_984_704


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
CONFIG_KEYS = st.sampled_from(
    [
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_size",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "layer_types",
        "sliding_window",
        "use_sliding_window",
        "text_config",
        "max_position_embeddings",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(CONFIG_KEYS, JSON_VALUES | st.integers(1, 256), max_size=8))
def test_any_config_either_parses_or_fails_with_a_planner_error(config: dict[str, Any]) -> None:
    try:
        model = model_from_config(config)
    except PlannerError as error:
        assert error.field.startswith("config")
        return
    assert kv_bytes_per_token(model) > 0


REQUEST_KEYS = st.sampled_from(
    [
        *("gpus", "gpu_mem_gib", "tensor_parallel_size", "kv_dtype", "weight_bytes"),
        *("weight_dtype", "reserved_fraction", "concurrency", "context_tokens", "reuse_ratio"),
        "model",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(REQUEST_KEYS, JSON_VALUES, max_size=4))
def test_any_request_either_plans_or_fails_with_a_planner_error(changes: dict[str, Any]) -> None:
    try:
        result = plan(request_from_dict(request(**changes)))
    except PlannerError:
        return
    assert result.fits == (result.headroom_bytes >= 0 and result.kv_capacity_bytes > 0)


DEPLOYMENTS = st.builds(
    Deployment,
    model=st.sampled_from(preset_names()).map(preset_model),
    gpus=st.just(8),
    gpu_mem_gib=st.floats(24, 300),
    tensor_parallel_size=st.sampled_from([1, 2, 4, 8]),
    kv_dtype=st.sampled_from(["bf16", "fp8"]),
    weight_dtype=st.sampled_from(["bf16", "fp8", "int4"]),
    reserved_fraction=st.floats(0, 0.5),
)


@settings(max_examples=200, deadline=None)
@given(DEPLOYMENTS, st.integers(1, 300_000))
def test_the_concurrency_boundary_is_the_last_load_that_fits(
    deployment: Deployment, context: int
) -> None:
    capacity = kv_capacity_per_gpu(deployment)
    limit = max_concurrency_at(deployment, context)
    if limit:
        assert kv_demand_per_gpu(deployment, limit, context) <= capacity
    assert kv_demand_per_gpu(deployment, limit + 1, context) > capacity


@settings(max_examples=200, deadline=None)
@given(DEPLOYMENTS, st.integers(1, 512))
def test_the_context_boundary_is_the_last_length_that_fits(
    deployment: Deployment, concurrency: int
) -> None:
    capacity = kv_capacity_per_gpu(deployment)
    limit = max_context_at(deployment, concurrency)
    assert limit is not None
    if limit:
        assert kv_demand_per_gpu(deployment, concurrency, limit) <= capacity
    assert kv_demand_per_gpu(deployment, concurrency, limit + 1) > capacity


@settings(max_examples=100, deadline=None)
@given(DEPLOYMENTS, st.integers(1, 64), st.integers(1, 100_000), st.floats(0, 1))
def test_shares_stay_in_range_and_add_up(
    deployment: Deployment, concurrency: int, context: int, reuse: float
) -> None:
    result = plan(PlanRequest(deployment, concurrency, context, reuse))
    assert 0 <= result.spill_fraction <= 1
    assert math.isclose(result.resident_saving_share + result.offload_saving_share, reuse)
    assert result.kv_demand_bytes == result.kv_demand_per_gpu_bytes * result.gpus
