"""The `vllm` profile's replay: the kept requests as the trace file `vllm bench serve
--dataset-name timed_trace` reads, with the plan the fidelity check holds it to. vLLM builds its
own token ids from each row's `hash_ids` (a chunk per (hash id, size), memoized), so the same
file and the same client hash seed give every arm the same prompts. Pure.

Read in vLLM 0.32's source (vllm/benchmarks/datasets/datasets.py, TimedTrace; serve.py): rows
are `timestamp`, `input_length`, `output_length`, `hash_ids`; `--timed-trace-chunk-hash-size`
(default 16) is the tokens per hash id, `--timed-trace-sec-multiplier` (default 1) turns
timestamps into seconds, and the dataset turns on `--self-timed` (each row sent at its time from
the benchmark's start) and `--ignore-eos` by itself. A prompt is each id's chunk in turn, the
last one cut to the remainder, so it is never longer than ids x chunk size. The client seeds each
chunk with `hash(f"{h}:{size}")`, which Python randomizes per process: without PYTHONHASHSEED
pinned, each arm's client would send other tokens (no sharing is lost inside one arm, but the
arms would no longer be byte-identical).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from runners.traces.fidelity import PlannedRequest
from runners.traces.records import TraceRecord
from runners.traces.replay import KeptRequest, ReplaySettings, kept_requests, prompt_length

# vLLM's own default chunk size: what a trace without blocks is cut into.
DEFAULT_CHUNK_TOKENS = 16


def chunk_tokens(settings: ReplaySettings) -> int:
    """The `--timed-trace-chunk-hash-size` the replay needs: the trace's block size."""
    return settings.block_tokens or DEFAULT_CHUNK_TOKENS


def timed_trace_replay(
    records: Iterable[TraceRecord], settings: ReplaySettings
) -> Iterator[tuple[bytes, PlannedRequest]]:
    """The same requests replay_requests keeps (same sampling, schedule and warm-up), each as a
    timed_trace row and the plan entry it is checked against. Timestamps are scaled seconds from
    the first kept request, which vLLM sends at once."""
    own_ids = _own_ids()
    for request in kept_requests(records, settings):
        row = {
            "timestamp": round(request.send_at_s or 0.0, 6),
            "input_length": request.record.input_tokens,
            "output_length": request.record.output_tokens,
            "hash_ids": _hash_ids(request, settings, own_ids),
        }
        line = json.dumps(row, separators=(",", ":")).encode() + b"\n"
        yield line, _planned(request, settings)


def timed_trace_lines(records: Iterable[TraceRecord], settings: ReplaySettings) -> Iterator[bytes]:
    return (line for line, _ in timed_trace_replay(records, settings))


def _hash_ids(request: KeptRequest, settings: ReplaySettings, own_ids: Iterator[int]) -> list[int]:
    """The chain keys (a Bailian trace's unchained ids then share only real prefixes); without
    blocks, as many ids of the request's own as its prompt needs chunks: vLLM makes no more
    tokens than ids x chunk size. Own ids are negative, so they never meet a block key."""
    if request.block_keys and settings.block_tokens:
        return request.block_keys
    chunks = -(-request.record.input_tokens // chunk_tokens(settings))
    return [next(own_ids) for _ in range(max(chunks, 1))]


def _own_ids() -> Iterator[int]:
    number = 0
    while True:
        number -= 1
        yield number


def _planned(request: KeptRequest, settings: ReplaySettings) -> PlannedRequest:
    return PlannedRequest(
        index=request.index,
        send_at_s=request.send_at_s,
        prompt_tokens=prompt_length(request.record, request.block_keys, settings.block_tokens),
        output_tokens=request.record.output_tokens,
        measured=request.measured,
    )
