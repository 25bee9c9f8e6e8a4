"""A trace's prediction per tier: read off its LRU curve, inclusive tiers, the GPU band from the
requests in flight, and the TTFT-saving band (exposed transfer vs overlapped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.planner import PlannerError, plan, request_from_dict
from gates.planner.trace_tiers import TierSizes, hit_ratio, predict_tiers, sizes_from_plan
from runners.traces.characterize import characterize
from runners.traces.readers.formats import read_trace_file

MOONCAKE = Path(__file__).resolve().parents[2] / "fixtures/traces/mooncake-synthetic_trace.jsonl"
GIB = 1024**3
# F(C): 10 % at 1,000 tokens, 40 % at 4,000, 60 % (the ceiling) at 16,000.
PROFILE = {
    "prefix_information": True,
    "infinite_cache_hit_ratio": 0.6,
    "hit_ratio_curve": [[1000, 0.1], [4000, 0.4], [16000, 0.6]],
}


def sizes(**overrides) -> TierSizes:
    values = {
        "gpu_tokens": 4000,
        "in_flight_tokens": 3000,
        "kv_bytes_per_token": GIB // 1000,  # 1 GiB holds 1,000 tokens
        "kv_bytes_per_token_per_gpu": GIB // 1000,
    }
    return TierSizes(**(values | overrides))


def test_the_curve_is_read_at_or_below_the_capacity():
    curve = PROFILE["hit_ratio_curve"]
    assert hit_ratio(curve, 999) == 0.0
    assert hit_ratio(curve, 1000) == 0.1
    assert hit_ratio(curve, 3999) == 0.1
    assert hit_ratio(curve, 10**9) == 0.6


def test_tiers_are_inclusive_and_the_gpu_band_comes_from_the_requests_in_flight():
    prediction = predict_tiers(PROFILE, sizes(dram_gib=12))
    gpu, dram, ssd = prediction.tiers
    # GPU between 1,000 (4,000 less 3,000 in flight) and 4,000 tokens: 10 % to 40 %.
    assert (gpu.low, gpu.high) == (0.1, 0.4)
    # 12 GiB of DRAM holds 12,000 tokens (F = 40 %): it adds 0 to 30 points.
    assert dram.capacity_tokens == 12000
    assert (dram.low, dram.high) == pytest.approx((0.0, 0.3))
    assert (ssd.low, ssd.high) == (0.0, 0.0)
    assert prediction.offload_share == pytest.approx((0.0, 0.3))
    assert prediction.recommendation == "offload_worth_testing"  # up to 30 %, over 10 %
    # An SSD of 16 GiB reaches the ceiling: it adds the last 20 points.
    _, _, ssd = predict_tiers(PROFILE, sizes(dram_gib=12, ssd_gib=16)).tiers
    assert (ssd.low, ssd.high) == pytest.approx((0.2, 0.2))
    assert prediction.ttft_saving is None  # no prefill rate given


def test_without_dram_or_ssd_offload_serves_nothing():
    prediction = predict_tiers(PROFILE, sizes())
    assert prediction.offload_share == (0.0, 0.0)
    assert any("No DRAM or SSD" in note for note in prediction.notes)
    assert prediction.recommendation == "offload_will_not_help"
    assert "at most 0%" in prediction.reason


def test_the_ttft_band_weighs_skipped_prefill_against_the_transfer():
    # 1,000 tokens/s of prefill: 1 ms a token; 1 GB/s link and 1e6 bytes a token: 1 ms too.
    band = predict_tiers(
        PROFILE,
        sizes(
            gpu_tokens=4000,
            in_flight_tokens=0,
            dram_gib=16,
            kv_bytes_per_token=10**6,
            kv_bytes_per_token_per_gpu=10**6,
            link_gbps=1.0,
            prefill_tokens_per_s=1000.0,
        ),
    ).ttft_saving
    assert band is not None
    dram_share = 0.6 - 0.4  # 16 GiB is 17,179 tokens of 1e6 bytes: F = 60 %
    # Exposed: loading costs what recomputing would, nothing is saved; overlapped: the
    # larger of (prefill left, transfer) is paid.
    assert band["low"] == pytest.approx(0.0)
    assert band["high"] == pytest.approx(1 - max(1 - dram_share, dram_share))


def test_a_load_shape_trace_has_no_prediction():
    with pytest.raises(PlannerError, match="load shape only"):
        predict_tiers({"prefix_information": False}, sizes())


def test_the_sizes_come_from_the_plan_of_the_docs_worked_example():
    result = plan(
        request_from_dict(
            {
                "model": "llama-3.1-70b",
                "gpus": 8,
                "gpu_mem_gib": 80,
                "concurrency": 64,
                "context_tokens": 32000,
            }
        )
    ).to_dict()
    tiers = sizes_from_plan(result, {"dram_gib": 1024.0})
    assert tiers.gpu_tokens == 59_670_984_704 // 40_960  # about 1.46M tokens (workloads.md)
    assert tiers.in_flight_tokens == 64 * 32000
    assert tiers.dram_gib == 1024.0


def test_the_mooncake_fixture_predicts_a_dram_share_from_its_own_curve():
    profile = characterize(read_trace_file(MOONCAKE, "mooncake"), block_tokens=512).to_dict()
    prediction = predict_tiers(
        profile,
        sizes(
            gpu_tokens=1_457_000,
            in_flight_tokens=0,
            kv_bytes_per_token=327_680,
            dram_gib=1024,
        ),
    )
    gpu, dram, _ = prediction.tiers
    assert gpu.low == hit_ratio(profile["hit_ratio_curve"], 1_457_000)
    assert 0 < dram.low <= profile["infinite_cache_hit_ratio"] - gpu.low
    assert gpu.low + dram.low <= profile["infinite_cache_hit_ratio"]
