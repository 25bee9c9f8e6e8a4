"""Benchmark: the bench client's own TTFT overhead at concurrency 64 (target: p99 under 2 ms).

Overhead of a request = client-measured TTFT - server-side TTFT. The client's TTFT ends at the
kernel's receive stamp of the first token's bytes; the server's TTFT runs from the kernel's
receive stamp of the request to the first token's bytes handed to the socket (simhost reports
it per request). What remains is the client's send path (start stamp to the request on the
wire) plus loopback both ways. Arrivals come at --request-rate (Poisson) under the
--max-concurrency cap, and output lengths are spread (range ratio 0.5), so streams neither
start nor end in lockstep.

The same requests are also scored as the bench scored them before kernel stamps, side by side:
client stamp when its event loop read the chunk, server TTFT from its handler's start.

    .venv/bin/python bench/simhost_client_overhead.py [--concurrency 64] [--prompts 640]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from simhost_common import REPO, Server, quantile

sys.path.insert(0, str(REPO))

from simhost.bench.args import bench_settings
from simhost.bench.run import Measurement, measure
from simhost.cli import build_parser


def _bench_flags(args: argparse.Namespace, url: str) -> list[str]:
    return [
        *("bench", "--base-url", url, "--dataset-name", "random"),
        *("--random-input-len", "256", "--random-output-len", "64"),
        *("--random-range-ratio", "0.5", "--num-prompts", str(args.prompts)),
        *("--max-concurrency", str(args.concurrency), "--num-warmups", str(args.concurrency)),
        *("--request-rate", args.request_rate),
    ]


def _series(measurement: Measurement) -> dict[str, list[float]]:
    """Per request, in ms: the target figure, its two legs, and the pre-kernel-stamp figure."""
    series: dict[str, list[float]] = {"overhead": [], "send": [], "receive": [], "before": []}
    for request in measurement.requests:
        outcome, timing = request.outcome, request.timing
        if not outcome.success or not timing or request.user_ttft is None:
            continue
        start, first_sent = outcome.start_time, timing["first_token_s"]
        series["overhead"].append((outcome.ttft - timing["server_ttft_s"]) * 1000)
        series["send"].append((timing["arrival_s"] - start) * 1000)
        series["receive"].append((start + outcome.ttft - first_sent) * 1000)
        series["before"].append((request.user_ttft - (first_sent - timing["handler_s"])) * 1000)
    return series


def _line(label: str, values: list[float]) -> str:
    figures = " / ".join(f"{quantile(values, q):.3f}" for q in (0.5, 0.9, 0.99))
    return f"{label:<34}{figures} ms (max {max(values):.3f})"


def _mean_in_flight(measurement: Measurement) -> float:
    """Little's law over the measured window: total request time / duration."""
    busy = sum(o.latency for o in measurement.outcomes if o.success)
    return busy / measurement.duration


def _report(args: argparse.Namespace, measurement: Measurement) -> None:
    series = _series(measurement)
    ttft = sorted(o.ttft * 1000 for o in measurement.outcomes if o.success)
    failed = sum(not o.success for o in measurement.outcomes)
    print(f"requests / failed:                {len(series['overhead'])} / {failed}")
    in_flight = _mean_in_flight(measurement)
    print(f"concurrency:                      {args.concurrency} (mean in flight {in_flight:.1f})")
    print(f"client TTFT p50 ms:               {quantile(ttft, 0.5):.2f}")
    print("                                  p50 / p90 / p99")
    print(_line("overhead (target: p99 < 2 ms):", series["overhead"]))
    print(_line("  send leg (to server kernel):", series["send"]))
    print(_line("  receive leg (to client kernel):", series["receive"]))
    print(_line("loop-read stamp - handler start:", series["before"]))
    p99, before = quantile(series["overhead"], 0.99), quantile(series["before"], 0.99)
    print(f"p99 loop-read / kernel stamps:    {before / p99:.1f}x")
    print(f"p99 overhead / p50 TTFT:          {p99 / quantile(ttft, 0.5):.2%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=640)
    parser.add_argument("--time-scale", type=float, default=0.5)
    parser.add_argument(
        "--request-rate", default="60", help="arrivals per second; inf sends in bursts"
    )
    args = parser.parse_args()
    started = time.monotonic()
    preset = ["--model-preset", "sim-480b-tp8", "--max-model-len", "16384"]
    server = Server([*preset, "--time-scale", str(args.time_scale), "--clock", "wall"])
    try:
        settings = bench_settings(build_parser().parse_args(_bench_flags(args, server.url)))
        measurement = asyncio.run(measure(settings))
    finally:
        server.stop()
    _report(args, measurement)
    print(f"wall:                             {time.monotonic() - started:.1f} s")
    print(f"load average (1 min):             {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
