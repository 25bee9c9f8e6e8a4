"""simhost beside the published offload results: every figure of docs/simhost.md "Calibration".

    python -m bench.simhost_calibration            # all sections (about a minute of CPU)
    python -m bench.simhost_calibration --only vendor

Runs simhost's engine in virtual time (simhost.engine.predict: the same engine, performance
model and presets the server and the planner use); no HTTP, no GPU. Deterministic.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

# Run as a script: the repository root, for `bench.` and the apps.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simhost.engine.perf import ModelShape, Platform, prefill_seconds
from simhost.engine.predict import ArmPrediction, SessionWorkload, predict_arms
from simhost.engine.presets import GPUS, LARGE_480B_TP8, QWEN3_CODER_480B, ModelPreset
from simhost.host.config import resolve_host_config
from simhost.scenarios import SCENARIOS
from simhost.simulation import run_arm

GIB = 1 << 30
LLAMA_8B = ModelShape(
    layers=32, heads=32, kv_heads=8, head_dim=128, active_params=8.03e9, total_params=8.03e9
)


def change(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+.0f} %"


def row(label: str, arms: dict[str, ArmPrediction]) -> str:
    res, off, rec = arms["resident"], arms["offload"], arms["recompute"]
    return (
        f"  {label:<34} TTFT p50 res {res.ttft_p50:7.2f} s  off {off.ttft_p50:7.2f} s  "
        f"rec {rec.ttft_p50:7.2f} s | off vs res TTFT {change(off.ttft_p50, res.ttft_p50)}, "
        f"throughput {change(off.output_throughput, res.output_throughput)} | "
        f"rec/res TTFT {rec.ttft_p50 / res.ttft_p50:.1f}x, "
        f"rec/off {rec.ttft_p50 / off.ttft_p50:.1f}x"
    )


def vendor() -> None:
    """The vendor report: Qwen3-Coder-480B TP8 on 8 MI308X, sessions of 32k-token prefixes
    resumed after a flush; GPU KV = the planner's 2.05 M tokens, a 2 TiB tier. The report's
    TTFT grows as (c+1)/2 prefills, so each tier is one wave of c sessions resumed at once."""
    print("vendor report (480B TP8, MI308X, 32k prefixes, cold recovery, one wave of c):")
    preset = replace(LARGE_480B_TP8, platform=replace(LARGE_480B_TP8.platform, gpu=GPUS["MI308X"]))
    for cap, label in ((None, "DMA links"), (2.7e9, "host side 2.7 GB/s")):
        for concurrency in (4, 8, 16):
            workload = SessionWorkload(
                sessions=concurrency, prefix=32000, suffix=512, output=256, resumes=1
            )
            arms = predict_arms(preset, workload, concurrency, 128_398, cap, 2048.0)
            print(row(f"c={concurrency}, {label}", arms))
    print("  (closed loop over 64 sessions instead of one wave:)")
    workload = SessionWorkload(sessions=64, prefix=32000, suffix=512, output=256, resumes=1)
    arms = predict_arms(preset, workload, 16, 128_398, None, 2048.0)
    print(row("c=16, 64 sessions, DMA links", arms))


def demo() -> None:
    """The demo's and the tests' offload-helps scenario (8 H100, 4096-token prefixes)."""
    print("simhost scenario offload-helps (what the demo and the G3 tests run):")
    host = resolve_host_config(None, None, {})
    for concurrency in (1, 8, 16):
        results = {
            a: run_arm(SCENARIOS["offload-helps"], a, host, concurrency)
            for a in ("resident", "offload", "recompute")
        }
        arms = {
            a: ArmPrediction(r.ttft_median(), r.output_throughput()) for a, r in results.items()
        }
        print(row(f"c={concurrency}", arms))


def threshold() -> None:
    """llm-d's QPS sweep has gains only under load: here 16 sessions of 2k-token prefixes that
    fit in GPU memory while few requests run, and stop fitting as concurrency grows."""
    print("load threshold (480B TP8, H100, no flush: eviction comes from load alone):")
    workload = SessionWorkload(
        sessions=16, prefix=2048, suffix=1024, output=64, resumes=3, flush_ratio=0.0
    )
    for concurrency in (1, 4, 8, 16, 24):
        arms = predict_arms(LARGE_480B_TP8, workload, concurrency, num_gpu_blocks=3072)
        print(row(f"c={concurrency}", arms))


def context() -> None:
    """The vLLM blog: one request's TTFT from the CPU tier vs recomputing, Llama-3.1-8B, H100."""
    print("gain vs context (Llama-3.1-8B, 1 H100, one request, CPU hit vs recompute):")
    platform = Platform(gpu=GPUS["H100-SXM5-80GB"], gpus=1)
    preset = ModelPreset(
        name="llama-8b",
        served_model_name="llama-8b",
        shape=LLAMA_8B,
        platform=platform,
        num_gpu_blocks=26_000,
        block_size=16,
        max_model_len=131072,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        weights_gib_per_gpu=15.0,
    )
    for length in (1024, 4096, 16384, 65536):
        workload = SessionWorkload(sessions=1, prefix=length, suffix=16, output=1, resumes=1)
        arms = predict_arms(preset, workload, 1)
        ratio = arms["recompute"].ttft_p50 / arms["offload"].ttft_p50
        print(f"  {length:>6} tokens: recompute/offload TTFT {ratio:5.1f}x")


def eviction() -> None:
    """No eviction, no gain: the same sessions with GPU memory for all of them."""
    print("no eviction (480B TP8, H100, GPU KV holds every session, no flush):")
    workload = SessionWorkload(
        sessions=16, prefix=4096, suffix=64, output=32, resumes=2, flush_ratio=0.0
    )
    for concurrency in (1, 16):
        print(row(f"c={concurrency}", predict_arms(LARGE_480B_TP8, workload, concurrency)))


def prefill() -> None:
    """Prefill speed of a 32k prompt: the attention term the issue asked for."""
    print("prefill alone (480B TP8, tokens/s of one prompt):")
    for gpu in ("H100-SXM5-80GB", "MI308X"):
        platform = replace(LARGE_480B_TP8.platform, gpu=GPUS[gpu])
        for tokens in (1024, 32768):
            seconds = prefill_seconds(platform, QWEN3_CODER_480B, tokens, 0, 8192)
            print(
                f"  {gpu:<15} {tokens:>6} tokens: {seconds:6.2f} s, {tokens / seconds:7.0f} tok/s"
            )


SECTIONS: dict[str, Callable[[], None]] = {
    "prefill": prefill,
    "vendor": vendor,
    "demo": demo,
    "threshold": threshold,
    "context": context,
    "eviction": eviction,
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
