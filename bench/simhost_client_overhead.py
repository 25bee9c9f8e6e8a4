"""Benchmark: the bench client's own TTFT overhead at concurrency 64 (target: p99 under 2 ms).

Overhead of a request = client-measured TTFT - server-side TTFT, where the server's TTFT runs
from its handler's start to the first token handed to the socket (simhost reports it per
request). What remains is the client's send and receive path plus loopback and the server's
accept queue. Arrivals come at --request-rate (Poisson) under the --max-concurrency cap, and
output lengths are spread (range ratio 0.5), so streams neither start nor end in lockstep.

    .venv/bin/python bench/simhost_client_overhead.py [--concurrency 64] [--prompts 640]
"""

from __future__ import annotations

import argparse
import os
import time

from simhost_common import Server, quantile, run_bench


def _mean_in_flight(result: dict) -> float:
    """Little's law over the measured window: total request time / duration."""
    busy = sum(t + sum(gaps) for t, gaps in zip(result["ttfts"], result["itls"], strict=True))
    return busy / result["duration"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=640)
    parser.add_argument("--time-scale", type=float, default=0.5)
    parser.add_argument(
        "--request-rate", default="60", help="arrivals per second; inf sends in bursts"
    )
    args = parser.parse_args()
    server = Server(
        [
            "--model-preset",
            "sim-480b-tp8",
            "--max-model-len",
            "16384",
            "--time-scale",
            str(args.time_scale),
        ]
    )
    started = time.monotonic()
    try:
        result = run_bench(
            server,
            [
                "--dataset-name",
                "random",
                "--random-input-len",
                "256",
                "--random-output-len",
                "64",
                "--random-range-ratio",
                "0.5",
                "--num-prompts",
                str(args.prompts),
                "--max-concurrency",
                str(args.concurrency),
                "--num-warmups",
                str(args.concurrency),
                "--request-rate",
                args.request_rate,
            ],
        )
    finally:
        server.stop()
    pairs = [
        (c, s)
        for c, s in zip(result["ttfts"], result["server_ttfts"], strict=False)
        if c and s is not None
    ]
    overhead = [(c - s) * 1000 for c, s in pairs]
    ttft = [c * 1000 for c, _ in pairs]
    print("requests / failed:        {} / {}".format(len(pairs), result["failed"]))
    in_flight = _mean_in_flight(result)
    print(f"concurrency:              {args.concurrency} (mean in flight {in_flight:.1f})")
    print(f"client TTFT p50 ms:       {quantile(ttft, 0.5):.2f}")
    print(
        "overhead p50 / p90 / p99: "
        f"{quantile(overhead, 0.5):.3f} / {quantile(overhead, 0.9):.3f} / "
        f"{quantile(overhead, 0.99):.3f} ms"
    )
    print(f"overhead max:             {max(overhead):.3f} ms")
    print(f"p99 overhead / p50 TTFT:  {quantile(overhead, 0.99) / quantile(ttft, 0.5):.2%}")
    print(f"wall:                     {time.monotonic() - started:.1f} s")
    print(f"load average (1 min):     {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
