from __future__ import annotations

from dataclasses import replace

import pytest

from simhost.datasets import DatasetSpec, SampleRequest, build_workload
from simhost.engine.batching import Engine, EngineConfig
from simhost.engine.presets import LARGE_480B_TP8, SMALL_1B
from simhost.engine.simulate import run_phase, simulate
from simhost.host.config import resolve_host_config
from simhost.scenarios import SCENARIOS
from simhost.simulation import run_arm
from simhost.textgen import join_words, vocab


def config(**overrides) -> EngineConfig:
    base = EngineConfig(
        preset=SMALL_1B,
        num_gpu_blocks=SMALL_1B.num_gpu_blocks,
        block_size=16,
        max_num_batched_tokens=SMALL_1B.max_num_batched_tokens,
        max_num_seqs=256,
        enable_prefix_caching=True,
        kv_offloading_gib=None,
        offload_bytes_per_s=50e9,
    )
    return replace(base, **overrides)


def sample(length: int, output: int = 4, offset: int = 0) -> SampleRequest:
    table = vocab()
    words = [table[(offset + i) % len(table)] for i in range(length)]
    return SampleRequest(join_words(words), length, output)


def unique(length: int, seed: int, output: int = 4) -> SampleRequest:
    return sample(length, output, offset=seed * 7919)


def test_prefill_time_grows_with_uncached_prompt_tokens():
    short, _ = run_phase(Engine(config()), [sample(256)], 1, 0.0)
    long, _ = run_phase(Engine(config()), [sample(4096)], 1, 0.0)
    assert long[0].ttft > short[0].ttft * 3


def test_decode_step_time_grows_with_batch_size():
    def time_per_output_token(concurrency: int) -> float:
        timings, _ = run_phase(
            Engine(config()),
            [unique(64, i, output=64) for i in range(concurrency)],
            concurrency,
            0.0,
        )
        return max((t.latency - t.ttft) / (t.output_tokens - 1) for t in timings)

    assert time_per_output_token(128) > time_per_output_token(1) * 1.5


def test_a_repeated_prefix_is_served_from_the_gpu_prefix_cache():
    engine = Engine(config())
    first, now = run_phase(engine, [sample(2048)], 1, 0.0)
    second, _ = run_phase(engine, [sample(2048)], 1, now)
    assert second[0].local_hit_tokens == 2032  # every full block but the last token's
    assert second[0].ttft < first[0].ttft / 3
    assert engine.stats.prefix_hits == 2032


def test_without_prefix_caching_everything_is_recomputed():
    engine = Engine(config(enable_prefix_caching=False))
    first, now = run_phase(engine, [sample(2048)], 1, 0.0)
    second, _ = run_phase(engine, [sample(2048)], 1, now)
    assert second[0].local_hit_tokens == 0
    assert second[0].ttft == pytest.approx(first[0].ttft, rel=0.01)
    assert engine.stats.prefix_queries == 0


def test_an_evicted_prefix_comes_back_from_the_cpu_tier_with_offload():
    engine = Engine(config(num_gpu_blocks=512, kv_offloading_gib=8.0))
    _, now = run_phase(engine, [sample(2048)], 1, 0.0)
    _, now = run_phase(engine, [unique(2048, i) for i in range(1, 5)], 1, now)
    resumed, _ = run_phase(engine, [sample(2048)], 1, now)
    assert resumed[0].local_hit_tokens == 0
    assert resumed[0].external_hit_tokens == 2032
    assert engine.stats.external_hits == 2032
    assert engine.stats.load_bytes == 2032 * SMALL_1B.kv_bytes_per_token


def test_an_evicted_prefix_is_recomputed_without_offload():
    engine = Engine(config(num_gpu_blocks=512))
    _, now = run_phase(engine, [sample(2048)], 1, 0.0)
    _, now = run_phase(engine, [unique(2048, i) for i in range(1, 5)], 1, now)
    resumed, _ = run_phase(engine, [sample(2048)], 1, now)
    assert resumed[0].local_hit_tokens == 0 and resumed[0].external_hit_tokens == 0
    assert engine.pool.evictions > 0


def test_a_full_cpu_tier_forgets_its_oldest_blocks():
    tiny_tier = 2048 * SMALL_1B.kv_bytes_per_token / (1 << 30)  # room for one prompt
    engine = Engine(config(num_gpu_blocks=512, kv_offloading_gib=tiny_tier))
    _, now = run_phase(engine, [sample(2048)], 1, 0.0)
    _, now = run_phase(engine, [unique(2048, i) for i in range(1, 5)], 1, now)
    resumed, _ = run_phase(engine, [sample(2048)], 1, now)
    assert resumed[0].external_hit_tokens == 0


def test_requests_wait_and_are_preempted_when_kv_runs_out():
    engine = Engine(config(num_gpu_blocks=300))  # 4800 tokens for 16 x 512-token sequences
    timings, _ = run_phase(engine, [unique(256, i, output=256) for i in range(16)], 16, 0.0)
    assert len(timings) == 16
    assert all(t.output_tokens == 256 for t in timings)
    assert engine.stats.preemptions > 0


def test_a_request_never_waits_forever_behind_loads_in_flight():
    engine = Engine(config(num_gpu_blocks=256, kv_offloading_gib=4.0))
    warm = [unique(1024, i, output=1) for i in range(8)]
    timings, _now = run_phase(engine, warm + warm, 8, 0.0)
    assert len(timings) == 16
    assert not engine.has_work()


def _helps() -> dict:
    host = resolve_host_config(None, None, {})
    scenario = SCENARIOS["offload-helps"]
    return {arm: run_arm(scenario, arm, host, 16) for arm in ("resident", "offload", "recompute")}


def test_offload_wins_on_long_context_cold_recovery_at_concurrency_16():
    results = _helps()
    resident, offload, recompute = results["resident"], results["offload"], results["recompute"]
    assert offload.ttft_median() < 0.6 * resident.ttft_median()
    # tens of percent, as published (docs/simhost.md "Calibration"), not hundreds
    assert 1.15 < offload.output_throughput() / resident.output_throughput() < 2
    assert recompute.ttft_median() > 3 * offload.ttft_median()
    assert recompute.ttft_median() > resident.ttft_median()  # recompute is not resident
    assert sum(t.external_hit_tokens for t in offload.timings) > 0


def test_offload_gains_nothing_on_short_prompts_at_concurrency_1():
    host = resolve_host_config(None, None, {})
    scenario = SCENARIOS["offload-does-not-help"]
    resident = run_arm(scenario, "resident", host, 1)
    offload = run_arm(scenario, "offload", host, 1)
    ratio = offload.ttft_median() / resident.ttft_median()
    assert 1.0 <= ratio < 1.03  # never better, at most a few percent worse
    throughput = offload.output_throughput() / resident.output_throughput()
    assert 0.97 < throughput <= 1.0


def test_the_same_workload_gives_the_same_virtual_timings():
    spec = DatasetSpec(name="prefix_repetition", num_prompts=24, seed=3, num_prefixes=4)
    first = simulate(Engine(config()), build_workload(spec), 8)
    second = simulate(Engine(config()), build_workload(spec), 8)
    assert [t.ttft for t in first.timings] == [t.ttft for t in second.timings]


def test_the_large_preset_is_slower_per_token_than_the_small_one():
    big = EngineConfig(
        preset=LARGE_480B_TP8,
        num_gpu_blocks=8192,
        block_size=16,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        enable_prefix_caching=True,
        kv_offloading_gib=None,
        offload_bytes_per_s=50e9,
    )
    small, _ = run_phase(Engine(config()), [sample(1024, output=16)], 1, 0.0)
    large, _ = run_phase(Engine(big), [sample(1024, output=16)], 1, 0.0)
    assert large[0].latency > 3 * small[0].latency
