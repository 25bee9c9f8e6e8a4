"""The pure performance model (simhost.engine.perf) and the shapes it must reproduce
(docs/simhost.md "Calibration"): costs monotone in context and batch, stores sharing the link
with loads, no gain without eviction, a load threshold, gain growing with context."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simhost.engine.perf import Gpu, HostLink, Platform, prefill_seconds, step_seconds
from simhost.engine.predict import SessionWorkload, predict_arms
from simhost.engine.presets import GPUS, LARGE_480B_TP8, QWEN3_CODER_480B, gpu_for_host_model

H100x8 = LARGE_480B_TP8.platform


def per_token_prefill(tokens: int) -> float:
    return prefill_seconds(H100x8, QWEN3_CODER_480B, tokens, 0, 8192) / tokens


def test_a_prefill_token_costs_more_the_longer_its_context():
    costs = [per_token_prefill(n) for n in (8192, 32768, 131072)]
    assert costs == sorted(costs)
    assert costs[-1] > 2 * costs[0]  # the attention term, not a constant token rate


def test_a_decode_step_grows_with_batch_and_context():
    def step(seqs: int, context: int) -> float:
        return step_seconds(H100x8, QWEN3_CODER_480B, [], [context] * seqs)

    assert step(1, 1024) < step(16, 1024) < step(16, 32768)


def test_a_moe_decode_step_reads_more_experts_as_the_batch_grows():
    one = step_seconds(H100x8, QWEN3_CODER_480B, [], [16])
    many = step_seconds(H100x8, QWEN3_CODER_480B, [], [16] * 64)
    assert many > 2 * one


def test_a_faster_gpu_runs_the_same_step_faster():
    chunk = [(8192, 16384)]
    h100 = step_seconds(H100x8, QWEN3_CODER_480B, chunk, [])
    mi308 = step_seconds(replace(H100x8, gpu=GPUS["MI308X"]), QWEN3_CODER_480B, chunk, [])
    assert mi308 > 2 * h100


def link(duplex: float) -> HostLink:
    gpu = Gpu("g", 1e15, 3e12, link_bytes_per_s=50e9, link_duplex=duplex, source="test")
    return HostLink(Platform(gpu=gpu, gpus=8))


@pytest.mark.parametrize("duplex, delay", [(2.0, 0.0), (1.0, 1.0), (83.4 / 50, 0.2)])
def test_stores_delay_the_loads_behind_them_by_the_links_duplex(duplex, delay):
    shared = link(duplex)
    seconds = shared.store(400e9, 0.0)  # 1 s of one-way transfer on 8 x 50 GB/s
    assert seconds == pytest.approx(1.0)
    _, done = shared.load(400e9, 0.0)
    assert done == pytest.approx(1.0 + delay, abs=0.01)


def test_the_host_side_caps_the_links():
    capped = HostLink(H100x8, cap_bytes_per_s=10e9)
    assert capped.load(10e9, 0.0) == (pytest.approx(1.0), pytest.approx(1.0))


def test_host_configs_name_their_gpus():
    assert gpu_for_host_model("NVIDIA H100 80GB HBM3").name == "H100-SXM5-80GB"
    assert gpu_for_host_model("AMD Instinct MI300X").name == "MI300X"
    assert gpu_for_host_model("AMD Instinct MI308X").name == "MI308X"
    assert gpu_for_host_model("NVIDIA H200").name == "H200-SXM-141GB"


def change(arms, arm="offload") -> float:
    return arms[arm].ttft_p50 / arms["resident"].ttft_p50 - 1


def test_no_eviction_no_gain():
    workload = SessionWorkload(sessions=8, prefix=2048, suffix=64, output=16, flush_ratio=0.0)
    arms = predict_arms(LARGE_480B_TP8, workload, 8)
    assert change(arms) >= -0.02
    throughput = arms["offload"].output_throughput / arms["resident"].output_throughput
    assert throughput < 1.02


def test_gain_appears_only_past_a_load_threshold():
    workload = SessionWorkload(
        sessions=16, prefix=2048, suffix=1024, output=64, resumes=3, flush_ratio=0.0
    )
    low = predict_arms(LARGE_480B_TP8, workload, 1, num_gpu_blocks=3072)
    high = predict_arms(LARGE_480B_TP8, workload, 24, num_gpu_blocks=3072)
    assert change(low) > -0.05  # everything fits in GPU memory: nothing to gain
    assert change(high) < -0.3  # running requests push the sessions out: the tier pays


def test_gain_grows_with_context():
    ratios = []
    for prefix in (1024, 4096, 16384):
        workload = SessionWorkload(sessions=1, prefix=prefix, suffix=16, output=1, resumes=1)
        arms = predict_arms(LARGE_480B_TP8, workload, 1, num_gpu_blocks=4096)
        ratios.append(arms["recompute"].ttft_p50 / arms["offload"].ttft_p50)
    assert ratios == sorted(ratios)
    assert ratios[-1] > 3 * ratios[0]


def test_cold_recovery_gain_grows_with_concurrency_and_recompute_differs_from_resident():
    workload = SessionWorkload(sessions=16, prefix=4096, suffix=64, output=32, order_seed=1)
    low = predict_arms(LARGE_480B_TP8, workload, 1, num_gpu_blocks=3072)
    high = predict_arms(LARGE_480B_TP8, workload, 16, num_gpu_blocks=3072)
    assert change(high) < change(low) < 0
    assert high["recompute"].ttft_p50 > 1.2 * high["resident"].ttft_p50


def test_a_slow_host_side_shrinks_the_gain_to_the_vendors_size():
    workload = SessionWorkload(sessions=4, prefix=32000, suffix=512, output=16, resumes=1)
    preset = LARGE_480B_TP8.on_gpu(GPUS["MI308X"])
    fast = predict_arms(preset, workload, 4, 128_398, None, 2048.0)
    slow = predict_arms(preset, workload, 4, 128_398, 2.7e9, 2048.0)
    assert change(fast) < -0.9
    assert -0.35 < change(slow) < -0.05
