"""The `vllm` profile's replay file: the same requests, schedule and warm-up as Tollgate's own
replay, in the rows `vllm bench serve --dataset-name timed_trace` reads, with a plan that says
how many tokens vLLM will make of each row."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from runners.traces.fidelity import PlannedRequest
from runners.traces.readers.formats import read_trace_file
from runners.traces.records import TraceRecord
from runners.traces.replay import ReplaySettings, replay_requests
from runners.traces.vllm_replay import timed_trace_lines, timed_trace_replay

MOONCAKE = Path(__file__).resolve().parents[2] / "fixtures/traces/mooncake-synthetic_trace.jsonl"
TRACE = [
    TraceRecord(0.0, 7, 3, (1, 2)),
    TraceRecord(0.5, 10, 3, (1, 2, 3)),
    TraceRecord(1.0, 4, 3, (9,)),
    TraceRecord(2.0, 8, 3, (1, 5)),
]


def vllm_prompt_length(row: dict, chunk: int) -> int:
    """How many tokens vLLM 0.32's TimedTrace makes of a row: a chunk per hash id, the last
    cut to what the row still needs, never past input_length."""
    made, wanted = 0, row["input_length"]
    for _ in row["hash_ids"]:
        size = min(chunk, wanted - made)
        if size <= 0:
            break
        made += size
    return made


def test_the_timed_trace_keeps_the_replays_requests_schedule_and_warm_up():
    settings = ReplaySettings(seed=7, block_tokens=4, time_scale=0.5, warmup_s=1.0)
    pairs = list(timed_trace_replay(TRACE, settings))
    rows = [json.loads(line) for line, _ in pairs]
    own = [PlannedRequest.of(request) for request in replay_requests(TRACE, settings)]
    assert [planned for _, planned in pairs] == own
    assert [row["timestamp"] for row in rows] == [0.0, 0.25, 0.5, 1.0]
    assert [row["hash_ids"] for row in rows] == [[1, 2], [1, 2, 3], [9], [1, 5]]
    assert [row["output_length"] for row in rows] == [3, 3, 3, 3]


def test_every_build_gives_the_same_bytes():
    settings = ReplaySettings(seed=7, block_tokens=4)
    builds = {b"".join(timed_trace_lines(TRACE, settings)) for _ in range(3)}
    assert len(builds) == 1


def test_the_plan_counts_the_tokens_vllm_makes_from_each_row():
    short_blocks = [TraceRecord(0.0, 20, 2, (1, 2)), TraceRecord(1.0, 5, 2, (1, 2, 3))]
    settings = ReplaySettings(seed=1, block_tokens=4)
    for line, planned in timed_trace_replay(short_blocks, settings):
        assert planned.prompt_tokens == vllm_prompt_length(json.loads(line), 4)
    assert [p.prompt_tokens for _, p in timed_trace_replay(short_blocks, settings)] == [8, 5]


def test_a_load_shape_trace_gives_each_request_enough_ids_of_its_own():
    loads = [TraceRecord(float(i), 40, 2, None) for i in range(3)]
    rows = [json.loads(line) for line in timed_trace_lines(loads, ReplaySettings(1, None))]
    assert all(vllm_prompt_length(row, 16) == 40 for row in rows)  # vLLM's default chunk
    ids = [hash_id for row in rows for hash_id in row["hash_ids"]]
    assert len(ids) == 9 and len(set(ids)) == 9 and all(hash_id < 0 for hash_id in ids)


def test_down_sampling_keeps_the_same_requests_as_tollgates_own_replay():
    records = list(itertools.islice(read_trace_file(MOONCAKE, "mooncake"), 400))
    settings = ReplaySettings(seed=3, block_tokens=512, time_scale=0.01, sample_fraction=0.3)
    pairs = list(timed_trace_replay(records, settings))
    own = [PlannedRequest.of(request) for request in replay_requests(records, settings)]
    assert 0 < len(pairs) < len(records) and [planned for _, planned in pairs] == own
    rows = [json.loads(line) for line, _ in pairs]
    assert [vllm_prompt_length(row, 512) for row in rows] == [p.prompt_tokens for p in own]
