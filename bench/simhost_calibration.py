"""simhost beside the published offload results: every figure of docs/simhost.md "Calibration".

    python -m bench.simhost_calibration            # all sections (about 15 s of CPU)
    python -m bench.simhost_calibration --only vendor

Runs simhost's engine in virtual time (simhost.engine.predict: the same engine, performance
model and presets the server and the planner use); no HTTP, no GPU. Deterministic. The figures
come from the pure functions below, which tests/simhost/test_calibration.py holds to the
factors the docs state; the sections only print them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

# Run as a script: the repository root, for `bench.` and the apps.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simhost.engine.perf import ModelShape, Platform, prefill_seconds
from simhost.engine.predict import ArmPrediction, SessionWorkload, predict_arms
from simhost.engine.presets import (
    GPUS,
    LARGE_480B_TP8,
    QWEN3_CODER_480B,
    ModelPreset,
    gpu_for_host_model,
)
from simhost.host.config import resolve_host_config
from simhost.scenarios import SCENARIOS
from simhost.simulation import run_arm

Arms = dict[str, ArmPrediction]
LLAMA_8B = ModelShape(
    layers=32, heads=32, kv_heads=8, head_dim=128, active_params=8.03e9, total_params=8.03e9
)
# The vendor report's platform: its host preset's GPUs; the GPU KV is the planner's 2.05 M
# tokens there (128,398 blocks of 16) and the tier 2 TiB, so every session is a full hit.
VENDOR_HOST = "mi308x8-rocm"
VENDOR_GPU_BLOCKS = 128_398
VENDOR_TIER_GIB = 2048.0
# The report's offload TTFTs fit full hits loaded at ~2.7 GB/s (docs/simhost.md), not DMA speed.
HOST_SIDES: dict[str, float | None] = {"DMA links": None, "host side 2.7 GB/s": 2.7e9}
VENDOR_TIERS = (4, 8, 16)
DEMO_TIERS = (1, 8, 16)
THRESHOLD_TIERS = (1, 4, 8, 16, 24)
CONTEXT_LENGTHS = (512, 1024, 4096, 16384, 65536)
EVICTION_TIERS = (1, 16)
PREFILL_GPUS = ("H100-SXM5-80GB", "MI308X")
PREFILL_LENGTHS = (1024, 32768)


def change(new: float, old: float) -> float:
    """The relative change from `old` to `new`, in percent."""
    return 100 * (new / old - 1)


def ttft_change(arms: Arms) -> float:
    return change(arms["offload"].ttft_p50, arms["resident"].ttft_p50)


def throughput_change(arms: Arms) -> float:
    return change(arms["offload"].output_throughput, arms["resident"].output_throughput)


def ttft_ratio(arms: Arms, arm: str, base: str) -> float:
    return arms[arm].ttft_p50 / arms[base].ttft_p50


def prefill_rate(gpu: str, tokens: int) -> tuple[float, float]:
    """(seconds, tokens/s) of one prompt alone on 480B TP8: the attention term grows with it."""
    platform = replace(LARGE_480B_TP8.platform, gpu=GPUS[gpu])
    seconds = prefill_seconds(platform, QWEN3_CODER_480B, tokens, 0, 8192)
    return seconds, tokens / seconds


def vendor_preset() -> ModelPreset:
    host = resolve_host_config(None, VENDOR_HOST, {})
    return LARGE_480B_TP8.on_gpu(gpu_for_host_model(host.gpu_model))


@cache
def vendor_arms(concurrency: int, host_side: float | None, sessions: int | None = None) -> Arms:
    """The vendor report: Qwen3-Coder-480B TP8 on 8 MI308X, sessions of 32k-token prefixes
    resumed once after a flush. Its TTFT grows as (c+1)/2 prefills, so each tier is one wave
    of c sessions resumed at once, unless `sessions` asks for a closed loop over more."""
    workload = SessionWorkload(
        sessions=sessions or concurrency, prefix=32000, suffix=512, output=256, resumes=1
    )
    return predict_arms(
        vendor_preset(), workload, concurrency, VENDOR_GPU_BLOCKS, host_side, VENDOR_TIER_GIB
    )


@cache
def demo_arms(concurrency: int) -> Arms:
    """The demo's and the G3 tests' offload-helps scenario on the default host (8 H100)."""
    host = resolve_host_config(None, None, {})
    results = {
        arm: run_arm(SCENARIOS["offload-helps"], arm, host, concurrency)
        for arm in ("resident", "offload", "recompute")
    }
    return {a: ArmPrediction(r.ttft_median(), r.output_throughput()) for a, r in results.items()}


@cache
def threshold_arms(concurrency: int) -> Arms:
    """llm-d's QPS sweep gains only under load: 16 sessions of 2k-token prefixes that fit in GPU
    memory while few requests run, and stop fitting as concurrency grows (no flush)."""
    workload = SessionWorkload(
        sessions=16, prefix=2048, suffix=1024, output=64, resumes=3, flush_ratio=0.0
    )
    return predict_arms(LARGE_480B_TP8, workload, concurrency, num_gpu_blocks=3072)


@cache
def context_ratio(length: int) -> float:
    """The vLLM blog: one request's TTFT recomputed / loaded from the CPU tier, Llama-3.1-8B on
    one H100."""
    preset = ModelPreset(
        name="llama-8b",
        served_model_name="llama-8b",
        shape=LLAMA_8B,
        platform=Platform(gpu=GPUS["H100-SXM5-80GB"], gpus=1),
        num_gpu_blocks=26_000,
        block_size=16,
        max_model_len=131072,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        weights_gib_per_gpu=15.0,
    )
    workload = SessionWorkload(sessions=1, prefix=length, suffix=16, output=1, resumes=1)
    return ttft_ratio(predict_arms(preset, workload, 1), "recompute", "offload")


@cache
def eviction_arms(concurrency: int) -> Arms:
    """No eviction, no gain: the same sessions with GPU memory for all of them, no flush."""
    workload = SessionWorkload(
        sessions=16, prefix=4096, suffix=64, output=32, resumes=2, flush_ratio=0.0
    )
    return predict_arms(LARGE_480B_TP8, workload, concurrency)


@cache
def thrash_arms() -> Arms:
    """The running requests overflow VRAM: 16 sessions of 16k on a 196k-token GPU KV at c = 16,
    so the arms without a tier preempt and recompute."""
    workload = SessionWorkload(sessions=16, prefix=16384, suffix=64, output=80, resumes=2)
    return predict_arms(LARGE_480B_TP8, workload, 16, num_gpu_blocks=12288)


def row(label: str, arms: Arms) -> str:
    res, off, rec = arms["resident"], arms["offload"], arms["recompute"]
    return (
        f"  {label:<34} TTFT p50 res {res.ttft_p50:7.2f} s  off {off.ttft_p50:7.2f} s  "
        f"rec {rec.ttft_p50:7.2f} s | off vs res TTFT {ttft_change(arms):+.0f} %, "
        f"throughput {throughput_change(arms):+.0f} % | "
        f"rec/res TTFT {ttft_ratio(arms, 'recompute', 'resident'):.1f}x, "
        f"rec/off {ttft_ratio(arms, 'recompute', 'offload'):.1f}x"
    )


def vendor() -> None:
    print("vendor report (480B TP8, MI308X, 32k prefixes, cold recovery, one wave of c):")
    for label, host_side in HOST_SIDES.items():
        for concurrency in VENDOR_TIERS:
            print(row(f"c={concurrency}, {label}", vendor_arms(concurrency, host_side)))
    print("  (closed loop over 64 sessions instead of one wave:)")
    print(row("c=16, 64 sessions, DMA links", vendor_arms(16, None, 64)))


def demo() -> None:
    print("simhost scenario offload-helps (what the demo and the G3 tests run):")
    for concurrency in DEMO_TIERS:
        print(row(f"c={concurrency}", demo_arms(concurrency)))


def threshold() -> None:
    print("load threshold (480B TP8, H100, no flush: eviction comes from load alone):")
    for concurrency in THRESHOLD_TIERS:
        print(row(f"c={concurrency}", threshold_arms(concurrency)))


def context() -> None:
    print("gain vs context (Llama-3.1-8B, 1 H100, one request, CPU hit vs recompute):")
    for length in CONTEXT_LENGTHS:
        print(f"  {length:>6} tokens: recompute/offload TTFT {context_ratio(length):5.1f}x")


def eviction() -> None:
    print("no eviction (480B TP8, H100, GPU KV holds every session, no flush):")
    for concurrency in EVICTION_TIERS:
        print(row(f"c={concurrency}", eviction_arms(concurrency)))


def thrash() -> None:
    print("preemption thrash (480B TP8, H100, 16 sessions of 16k on a 196k-token GPU KV):")
    print(row("c=16", thrash_arms()))


def prefill() -> None:
    print("prefill alone (480B TP8, tokens/s of one prompt):")
    for gpu in PREFILL_GPUS:
        for tokens in PREFILL_LENGTHS:
            seconds, rate = prefill_rate(gpu, tokens)
            print(f"  {gpu:<15} {tokens:>6} tokens: {seconds:6.2f} s, {rate:7.0f} tok/s")


SECTIONS: dict[str, Callable[[], None]] = {
    "prefill": prefill,
    "vendor": vendor,
    "demo": demo,
    "threshold": threshold,
    "context": context,
    "eviction": eviction,
    "thrash": thrash,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SECTIONS))
    args = parser.parse_args()
    for name, section in SECTIONS.items():
        if args.only in (None, name):
            section()


if __name__ == "__main__":
    main()
