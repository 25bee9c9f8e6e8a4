"""simhost's G3 cell on a busy machine: the three arms of the offload-helps scenario through real
`serve` and `bench` (HTTP), repeated, while CPU burners keep the load average up.

    python -m bench.simhost_busy [--runs 10] [--burners 8] [--clock virtual|wall]

Prints, per run, offload vs resident TTFT p50 and output throughput, and recompute / offload
TTFT p50 at the scenario's concurrency 16, then the spread across runs and the load average.
With `--clock virtual` (the default) the spread should be the scenario's 4 % noise, whatever
the load; `--clock wall` shows what the machine's scheduler adds. Not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Run as a script: the repository root, for `bench.` and the apps.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.simhost_common import Server, run_bench
from simhost.scenarios import SCENARIOS, arm_flags

BURN = "while True: pass"


def serve_flags(clock: str) -> list[str]:
    scenario = SCENARIOS["offload-helps"]
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in scenario.serve.items()]
    return [*flags, "--clock", clock]


def bench_flags() -> list[str]:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SCENARIOS["offload-helps"].bench.items()]
    return [f for f in flags if not f.startswith("--seed")]


def one_run(clock: str, seed: int) -> dict[str, dict]:
    scenario = SCENARIOS["offload-helps"]
    results = {}
    for arm in ("resident", "offload", "recompute"):
        server = Server([*serve_flags(clock), *arm_flags(arm, scenario)])
        try:
            results[arm] = run_bench(server, [*bench_flags(), "--seed", str(seed)])
        finally:
            server.stop()
    return results


def spread(values: list[float]) -> str:
    logs = [math.log(v) for v in values]
    # One run (the CI smoke size) has a median and a range but no spread.
    sd = f"{statistics.stdev(logs):.3f}" if len(logs) > 1 else "n/a (one run)"
    return (
        f"median {statistics.median(values):.3f}, range {min(values):.3f}-{max(values):.3f}, "
        f"sd of log {sd}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--burners", type=int, default=8)
    parser.add_argument("--clock", choices=["virtual", "wall"], default="virtual")
    args = parser.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    rows: dict[str, list[float]] = {"ttft": [], "throughput": [], "recompute": []}
    loads = []
    try:
        for run in range(args.runs):
            results = one_run(args.clock, seed=run + 1)
            res, off, rec = (results[a] for a in ("resident", "offload", "recompute"))
            rows["ttft"].append(off["median_ttft_ms"] / res["median_ttft_ms"])
            rows["throughput"].append(off["output_throughput"] / res["output_throughput"])
            rows["recompute"].append(rec["median_ttft_ms"] / off["median_ttft_ms"])
            loads.append(os.getloadavg()[0])
            print(
                f"run {run + 1}: offload/resident TTFT {rows['ttft'][-1]:.3f}, throughput "
                f"{rows['throughput'][-1]:.3f}, recompute/offload TTFT {rows['recompute'][-1]:.1f}x"
                f" (load average {loads[-1]:.1f})",
                flush=True,
            )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    for name, values in rows.items():
        print(f"{name}: {spread(values)}")
    print(f"load average during the runs: {min(loads):.1f}-{max(loads):.1f}")


if __name__ == "__main__":
    main()
