"""simhost serves a trace replay: `python -m simhost.bench.replay` sends the replay file open loop
as token ids, the server's prefix cache (keyed by the prompts' token blocks) hits what the trace
shares, and every request comes back with the trace's token counts and its own record."""

from __future__ import annotations

import json
import subprocess
import sys

from runners.traces.characterize import characterize
from runners.traces.fidelity import RequestRecord, check_fidelity
from runners.traces.records import TraceRecord
from runners.traces.replay import ReplaySettings, replay_file_lines, replay_requests
from tests.simhost.conftest import REPO, simhost_env
from tests.simhost.server.test_server import metrics, value

BLOCK = 16


def multi_turn_trace(sessions: int = 6, turns: int = 4) -> list[TraceRecord]:
    """Each turn re-sends its session's history: turn n+1's blocks extend turn n's."""
    records = []
    for turn in range(turns):
        for session in range(sessions):
            blocks = tuple(1000 * session + b for b in range(3 * (turn + 1)))
            at = turn * 0.4 + session * 0.05
            # Whole blocks: a server caches only full blocks, while the trace counts a block id
            # seen partial and later whole as a hit (workloads.md: granularity).
            records.append(TraceRecord(at, len(blocks) * BLOCK, 3, blocks, f"s{session}"))
    return sorted(records, key=lambda record: record.arrival_s or 0)


def replay_against(server, tmp_path, trace) -> tuple[list, list[RequestRecord]]:
    planned = list(replay_requests(trace, ReplaySettings(seed=11, block_tokens=BLOCK)))
    replay_file = tmp_path / "replay.jsonl"
    replay_file.write_bytes(b"".join(replay_file_lines(planned)))
    records_file = tmp_path / "records.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "simhost.bench.replay",
            "--base-url",
            server.url,
            "--replay",
            str(replay_file),
            "--records",
            str(records_file),
        ],
        env=simhost_env(server.state_dir),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = records_file.read_text().splitlines()
    return planned, [RequestRecord.from_dict(json.loads(line)) for line in lines]


def test_simhost_serves_the_replay_with_the_traces_counts_and_prefix_hits(serve, tmp_path):
    server = serve("--time-scale", "0.02", "--block-size", str(BLOCK))
    trace = multi_turn_trace()
    planned, records = replay_against(server, tmp_path, trace)
    assert len(records) == len(planned) == 24 and all(record.ok for record in records)
    assert all(record.ttft_ms is not None and record.e2el_ms is not None for record in records)
    fidelity = check_fidelity(planned, records)
    # The token bars are exact; the arrival bar is timing on a shared box, so only reported.
    assert fidelity.prompt_token_mismatches == fidelity.output_token_mismatches == 0
    assert fidelity.sent == 24 and fidelity.arrival_error_ms is not None
    samples = metrics(server.url)
    hits = value(samples, "vllm:prefix_cache_hits_total")
    ceiling = characterize(trace, block_tokens=BLOCK).infinite_cache_hit_ratio or 0
    trace_hits = ceiling * sum(record.input_tokens for record in trace)
    # Every block a later turn re-sends is cached (whole blocks, nothing evicted at this size).
    assert hits == round(trace_hits) > 0
