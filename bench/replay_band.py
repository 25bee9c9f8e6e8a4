"""How long the replay TTFT band takes, and how close it comes to what simhost measures (not a
test; one run, figures go to docs/workloads.md):

    python bench/replay_band.py [--sizes 1000 10000] [--requests 120] [--tier 8]

1. Prediction time (CPU seconds of this process) for synthetic traces of --sizes requests:
   the kept requests read in one pass, the first 1,000 run through the engine (the cap), at
   --tier, every arm and every run of the band (simhost.engine.replay_predict).
2. The shipped Mooncake fixture's first --requests requests replayed open loop against a real
   `simhost serve` (sim-1b, the default preset) on each arm by simhost's replay client at
   --tier, the measured TTFT p50 of the measured requests beside the predicted band for the
   same preset: the ratio measured / band middle, and whether it lies in the band; then the
   TTFT change offload / baseline measured from those p50s against the predicted change band
   (paired by seed and clock, widened by RESOLUTION) and the band the two arms' p50 bands'
   extremes would give.
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
)

BLOCK = 512
OFFLOAD_GIB = 64.0
SERVE_FLAGS = {
    "resident": [],
    "offload": ["--kv-offloading-size", str(OFFLOAD_GIB)],
    "recompute": ["--no-enable-prefix-caching"],
}


def prediction_time(size: int, tier: int) -> None:
    records = _requests_of(size)
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
        f"{size:>7} requests: {seconds:6.1f} s CPU, {prediction.modelled_requests} modelled "
        f"(capped: {prediction.capped}), {runs} engine runs at c={tier}"
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
        measured = served[arm] = _served_ttft_p50(arm, records, settings, tier)
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
        measured = served[over] / served[base]
        inside = "within" if low <= measured <= high else "outside"
        print(
            f"  {name}: predicted {low:.3f} to {high:.3f} (paired; {apart_low:.3f} to "
            f"{apart_high:.3f} from the extremes), measured {measured:.3f} ({inside})"
        )


def _served_ttft_p50(arm: str, records: list, settings: ReplaySettings, tier: int) -> float:
    """Replay on a fresh server (caches empty, as the arms are restarted) and read the p50."""
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
    ttfts = sorted(row["ttft_ms"] / 1000 for row in rows if row["ok"] and row["measured"])
    middle = len(ttfts) // 2
    return ttfts[middle] if len(ttfts) % 2 else (ttfts[middle - 1] + ttfts[middle]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--requests", type=int, default=120, help="fixture requests replayed")
    parser.add_argument("--tier", type=int, default=8)
    args = parser.parse_args()
    for size in args.sizes:
        prediction_time(size, args.tier)
    measured_against_predicted(args.requests, args.tier)


if __name__ == "__main__":
    main()
