"""Benchmark: `simhost serve` holds N concurrent streaming requests (target 500) without errors.

Starts one server (sim-480b-tp8, --max-num-seqs above N so every stream decodes at once) and
drives it with `simhost bench --max-concurrency N`, while a thread samples
vllm:num_requests_running from /metrics to prove N streams were really open together.

    .venv/bin/python bench/simhost_serve.py [--streams 500] [--rounds 2] [--time-scale 0.1]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import urllib.request

from simhost_common import Server, quantile, run_bench


def _sample_running(url: str, stop: threading.Event, peaks: list) -> None:
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
                for line in response.read().decode().splitlines():
                    if line.startswith("vllm:num_requests_running{"):
                        peaks.append(float(line.rsplit(" ", 1)[1]))
        except OSError:
            pass
        stop.wait(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream")
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--time-scale", type=float, default=0.1)
    args = parser.parse_args()
    flags = ["--model-preset", "sim-480b-tp8", "--max-model-len", "16384"]
    flags += ["--max-num-seqs", str(args.streams + 12), "--time-scale", str(args.time_scale)]
    server = Server(flags)
    stop, peaks = threading.Event(), []
    sampler = threading.Thread(target=_sample_running, args=(server.url, stop, peaks))
    sampler.start()
    cpu_before, started = server.cpu_seconds(), time.monotonic()
    try:
        result = run_bench(
            server,
            [
                "--dataset-name",
                "random",
                "--random-input-len",
                "256",
                "--random-output-len",
                str(args.output_len),
                "--random-range-ratio",
                "0.2",
                "--num-prompts",
                str(args.streams * args.rounds),
                "--max-concurrency",
                str(args.streams),
            ],
        )
    finally:
        stop.set()
        sampler.join()
        wall, cpu = time.monotonic() - started, server.cpu_seconds() - cpu_before
        server.stop()
    ttfts = [t * 1000 for t in result["ttfts"] if t]
    print(f"streams asked:            {args.streams}")
    print(f"peak running (server):    {max(peaks or [0]):.0f}")
    print("completed / failed:       {} / {}".format(result["completed"], result["failed"]))
    print("output tokens/s:          {:.0f}".format(result["output_throughput"]))
    print(f"client TTFT p50 / p99 ms: {quantile(ttfts, 0.5):.1f} / {quantile(ttfts, 0.99):.1f}")
    print(f"server CPU share:         {cpu / wall:.0%} of one core over {wall:.1f} s")
    print(f"load average (1 min):     {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    errors = sorted({e for e in result["errors"] if e})
    if errors:
        print(f"errors:                   {errors[:3]}")


if __name__ == "__main__":
    main()
