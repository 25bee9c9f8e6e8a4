"""How long the replay TTFT band takes, and how close it comes to what simhost measures (not a
test; one run, figures go to docs/workloads.md):

    python bench/replay_band.py [--sizes 1000 10000] [--requests 120] [--tier 8] [--skip-shipped]

1. Prediction time (CPU seconds of this process) for the shipped Mooncake fixture and for
   synthetic traces of --sizes requests: the kept requests read in one pass, the first 1,000 run
   through the engine (the cap), at --tier, every arm and every run of the band, every TTFT
   statistic from the same runs (simhost.engine.replay_predict).
2. The shipped Mooncake fixture's first --requests requests replayed open loop against a real
   `simhost serve` (sim-1b, the default preset) on each arm by simhost's replay client at
   --tier, the measured TTFT p50 of the measured requests beside the predicted band for the
   same preset: the ratio measured / band middle, and whether it lies in the band; then the
   TTFT change offload / baseline measured from those p50s against the predicted change band
   (paired by seed and clock, widened by RESOLUTION) and the band the two arms' p50 bands'
   extremes would give; then the same change for p90, p99 and the mean, each read from the
   measured requests' TTFTs as the replay-records adapter reads them (nearest rank).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.simhost_common import Server, _env  # noqa: E402
from bench.trace_characterize import MOONCAKE, synthetic_trace  # noqa: E402
from gates.planner.replay_band import RESOLUTION, replayed  # noqa: E402
from runners.traces.readers.formats import read_trace_file  # noqa: E402
from runners.traces.replay import (  # noqa: E402
    ReplaySettings,
    kept_requests,
    replay_file_lines,
    replay_requests,
)
from simhost.engine.presets import SMALL_1B  # noqa: E402
from simhost.engine.replay_predict import (  # noqa: E402
    MAX_REQUESTS,
    independent_change_band,
    predict_replay_ttft,
    ttft_statistics,
)

BLOCK = 512
OFFLOAD_GIB = 64.0
SERVE_FLAGS = {
    "resident": [],
    "offload": ["--kv-offloading-size", str(OFFLOAD_GIB)],
    "recompute": ["--no-enable-prefix-caching"],
}


def prediction_time(size: int, tier: int) -> None:
    _timed(f"{size:>7} requests", _requests_of(size), tier)


def shipped_prediction_time(tier: int) -> None:
    _timed("shipped fixture", list(read_trace_file(MOONCAKE, "mooncake", BLOCK)), tier)


def _timed(name: str, records: list, tier: int) -> None:
    settings = ReplaySettings(seed=1, block_tokens=BLOCK)
    started = time.process_time()
    kept = list(kept_requests(records, settings))
    head = [replayed(request, BLOCK) for request in kept[:MAX_REQUESTS]]
    prediction = predict_replay_ttft(
        SMALL_1B, head, tier, trace_block_tokens=BLOCK, offload_gib=OFFLOAD_GIB, kept=len(kept)
    )
    seconds = time.process_time() - started
    runs = sum(band.runs for band in prediction.arms.values())
    print(
        f"{name}: {seconds:6.1f} s CPU, {prediction.modelled_requests} modelled "
        f"(capped: {prediction.capped}), {runs} engine runs at c={tier}, "
        f"{len(prediction.statistic_changes)} statistics"
    )


def _requests_of(size: int) -> list:
    """Synthetic Mooncake-like requests (~30 blocks each), cut to `size`."""
    records = synthetic_trace(size * 40)
    while len(records) < size:
        records += synthetic_trace(size * 40, seed=len(records))
    return records[:size]


def measured_against_predicted(requests: int, tier: int) -> None:
    records = list(itertools.islice(read_trace_file(MOONCAKE, "mooncake", BLOCK), requests))
    settings = ReplaySettings(seed=1, block_tokens=BLOCK)
    head = [replayed(request, BLOCK) for request in kept_requests(records, settings)]
    prediction = predict_replay_ttft(
        SMALL_1B, head, tier, trace_block_tokens=BLOCK, offload_gib=OFFLOAD_GIB
    )
    print(f"fixture, first {requests} requests at c={tier} (sim-1b, {OFFLOAD_GIB:g} GiB offload):")
    served = {}
    for arm, band in prediction.arms.items():
        low, high = band.low_s * (1 - RESOLUTION), band.high_s * (1 + RESOLUTION)
        served[arm] = ttft_statistics(_served_ttfts(arm, records, settings, tier))
        measured = served[arm]["p50"]
        ratio = measured / ((low + high) / 2)
        inside = "within" if low <= measured <= high else "outside"
        print(
            f"  {arm:>9}: predicted {low * 1000:8.1f} to {high * 1000:8.1f} ms, measured "
            f"{measured * 1000:8.1f} ms, ratio {ratio:5.2f} ({inside})"
        )
    for name, change in prediction.changes.items():
        over, base = name.split("/")
        low, high = change.low * (1 - RESOLUTION), change.high * (1 + RESOLUTION)
        apart = independent_change_band(prediction.arms[over], prediction.arms[base])
        apart_low, apart_high = apart[0] * (1 - RESOLUTION), apart[1] * (1 + RESOLUTION)
        measured = served[over]["p50"] / served[base]["p50"]
        inside = "within" if low <= measured <= high else "outside"
        print(
            f"  {name}: predicted {low:.3f} to {high:.3f} (paired; {apart_low:.3f} to "
            f"{apart_high:.3f} from the extremes), measured {measured:.3f} ({inside})"
        )
    for statistic, changes in prediction.statistic_changes.items():
        for name, change in changes.items():
            over, base = name.split("/")
            low, high = change.low * (1 - RESOLUTION), change.high * (1 + RESOLUTION)
            measured = served[over][statistic] / served[base][statistic]
            inside = "within" if low <= measured <= high else "outside"
            print(
                f"  TTFT {statistic} {name}: predicted {low:.3f} to {high:.3f}, measured "
                f"{measured:.3f} ({inside})"
            )


def _served_ttfts(arm: str, records: list, settings: ReplaySettings, tier: int) -> list:
    """Replay on a fresh server (caches empty, as the arms are restarted): the measured TTFTs."""
    server = Server(SERVE_FLAGS[arm])
    try:
        replay = os.path.join(server.state_dir, "replay.jsonl")
        out = os.path.join(server.state_dir, "records.jsonl")
        with open(replay, "wb") as handle:
            handle.writelines(replay_file_lines(replay_requests(records, settings)))
        command = [sys.executable, "-m", "simhost.bench.replay", "--base-url", server.url]
        command += ["--replay", replay, "--records", out, "--max-concurrency", str(tier)]
        done = subprocess.run(command, env=_env(server.state_dir), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("simhost replay failed: " + done.stderr)
        with open(out) as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
    finally:
        server.stop()
    return [row["ttft_ms"] / 1000 for row in rows if row["ok"] and row["measured"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--requests", type=int, default=120, help="fixture requests replayed")
    parser.add_argument("--tier", type=int, default=8)
    parser.add_argument(
        "--skip-shipped", action="store_true", help="no timing on the shipped trace (~20 s)"
    )
    args = parser.parse_args()
    if not args.skip_shipped:
        shipped_prediction_time(args.tier)
    for size in args.sizes:
        prediction_time(size, args.tier)
    measured_against_predicted(args.requests, args.tier)


if __name__ == "__main__":
    main()
