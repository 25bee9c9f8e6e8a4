"""How fast the one-pass characterisation is, beside one naive LRU simulation per capacity,
measured in the same run as CPU time of this process (the machine may be shared; not a test;
figures go to docs/workloads.md):

    python bench/trace_characterize.py [--accesses 2000000] [--capacities 16]

1. The Mooncake synthetic trace (tests/fixtures/traces), one pass vs the naive baseline at the
   same capacities.
2. A synthetic Mooncake-like trace (shared system prompts, multi-turn sessions that re-send
   their history) of --accesses block accesses: one pass only, its cost per access; the naive
   baseline runs on its first tenth and is compared with the one pass on the same tenth.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runners.traces.characterize import characterize  # noqa: E402
from runners.traces.lru_simulation import simulated_hit_ratio  # noqa: E402
from runners.traces.readers.formats import read_trace_file  # noqa: E402
from runners.traces.records import TraceRecord  # noqa: E402

BLOCK = 512
MOONCAKE = ROOT / "tests" / "fixtures" / "traces" / "mooncake-synthetic_trace.jsonl"


def synthetic_trace(accesses: int, seed: int = 1) -> list[TraceRecord]:
    """Requests of ~30 blocks: half continue a live session (its history plus a few new
    blocks), half open one under one of 50 shared system prompts; one request per 0.2 s."""
    rng = random.Random(seed)
    roots = [list(range(i * 8, i * 8 + 8)) for i in range(50)]
    next_id, sessions, records, total = 400, [], [], 0
    while total < accesses:
        if sessions and rng.random() < 0.5:
            history = sessions.pop(rng.randrange(len(sessions)))
        else:
            history = list(rng.choice(roots))
        new = rng.randint(2, 12)
        ids = history + list(range(next_id, next_id + new))
        next_id += new
        if len(ids) < 120:
            sessions.append(ids)
        records.append(TraceRecord(len(records) * 0.2, len(ids) * BLOCK - 100, 200, tuple(ids)))
        total += len(ids)
    return records


def capacities(records: list[TraceRecord], count: int) -> list[int]:
    distinct = len({i for r in records for i in r.block_ids or ()})
    return [max(1, distinct * (k + 1) // count) * BLOCK for k in range(count)]


def one_pass(records: list[TraceRecord], caps: list[int]) -> tuple[float, dict[int, float]]:
    start = time.process_time()
    profile = characterize(records, block_tokens=BLOCK, capacities_tokens=caps)
    return time.process_time() - start, profile.hit_ratio_at


def naive(records: list[TraceRecord], caps: list[int]) -> tuple[float, dict[int, float]]:
    start = time.process_time()
    ratios = {c: simulated_hit_ratio(records, c, BLOCK) for c in caps}
    return time.process_time() - start, ratios


def compare(name: str, records: list[TraceRecord], count: int) -> None:
    caps = capacities(records, count)
    accesses = sum(len(r.block_ids or ()) for r in records)
    fast, fast_ratios = one_pass(records, caps)
    slow, slow_ratios = naive(records, caps)
    assert fast_ratios == slow_ratios, "the one pass and the simulations disagree"
    print(
        f"{name}: {len(records):,} requests, {accesses:,} block accesses, {count} capacities: "
        f"one pass {fast:.2f} s ({fast / accesses * 1e6:.1f} us/access), "
        f"naive {slow:.2f} s, naive/one-pass {slow / fast:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--accesses", type=int, default=2_000_000)
    parser.add_argument("--capacities", type=int, default=16)
    args = parser.parse_args()
    start = time.process_time()
    mooncake = list(read_trace_file(MOONCAKE, "mooncake"))
    print(f"read the Mooncake fixture: {time.process_time() - start:.2f} s")
    compare("mooncake synthetic", mooncake, args.capacities)
    compare("mooncake synthetic", mooncake, 64)  # about as many points as the plotted curve
    big = synthetic_trace(args.accesses)
    compare("synthetic, first tenth", big[: len(big) // 10], args.capacities)
    seconds, _ = one_pass(big, capacities(big, args.capacities))
    accesses = sum(len(r.block_ids or ()) for r in big)
    distinct = len({i for r in big for i in r.block_ids or ()})
    print(
        f"synthetic, whole: {len(big):,} requests, {accesses:,} block accesses, {distinct:,} "
        f"distinct: one pass {seconds:.1f} s ({seconds / accesses * 1e6:.1f} us/access)"
    )


if __name__ == "__main__":
    main()
