"""The `vllm` profile's replay: the kept requests as the trace file `vllm bench serve
--dataset-name timed_trace` reads, and that command's flags. vLLM builds its own token ids from
each row's `hash_ids` (a chunk per (hash id, size), memoized), so the same file and the same
client hash seed give every arm the same prompts. Pure.

Read in vLLM's source: rows are `timestamp`, `input_length`, `output_length`, `hash_ids`;
`--timed-trace-chunk-hash-size` (default 16) is the block size, `--timed-trace-sec-multiplier`
(default 1) turns timestamps into seconds, `--self-timed` sends each row at its time. Python's
client seeds each chunk with `hash(f"{h}:{size}")`, which Python randomizes per process: without
PYTHONHASHSEED pinned, each arm's client would send other tokens (no sharing is lost inside
one arm, but the arms would no longer be byte-identical).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from runners.traces.prefix_hits import BlockKeys
from runners.traces.records import TraceRecord
from runners.traces.replay import ReplaySettings, kept, sample_group


def timed_trace_lines(records: Iterable[TraceRecord], settings: ReplaySettings) -> Iterator[bytes]:
    """The same requests replay_requests keeps (same sampling, same schedule), as timed_trace
    rows: timestamps already in scaled seconds from the first kept request, hash_ids the chain
    keys (so a Bailian trace's unchained ids still share only real prefixes)."""
    keys = BlockKeys(settings.chained_ids)
    start: float | None = None
    for position, record in enumerate(records):
        block_keys = keys.of(record.block_ids) if record.block_ids is not None else None
        if not kept(sample_group(record, block_keys, position), settings):
            continue
        arrival = record.arrival_s or 0.0
        start = arrival if start is None else start
        row = {
            "timestamp": round((arrival - start) * settings.time_scale, 6),
            "input_length": record.input_tokens,
            "output_length": record.output_tokens,
            # Without blocks, one id per request of its own: vLLM needs ids to make a prompt.
            "hash_ids": block_keys if block_keys else [-(position + 1)],
        }
        yield json.dumps(row, separators=(",", ":")).encode() + b"\n"


def timed_trace_command(
    *, dataset_path: str, num_prompts: int, block_tokens: int, seed: int
) -> tuple[list[str], dict[str, str]]:
    """`vllm bench serve` arguments for the replay, and the environment they need."""
    arguments = [
        *("--dataset-name", "timed_trace", "--dataset-path", dataset_path),
        *("--num-prompts", str(num_prompts), "--self-timed"),
        *("--timed-trace-chunk-hash-size", str(block_tokens)),
        *("--timed-trace-sec-multiplier", "1", "--ignore-eos", "--save-detailed"),
    ]
    return arguments, {"PYTHONHASHSEED": str(seed)}
