"""vLLM 0.32's `--save-detailed` result of a timed-trace replay, read into the per-request
records a replay keeps: on real captures (tests/fixtures/vllm-bench-trace/PROVENANCE.md)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from runners.adapters import AdapterError, parse
from runners.adapters.replay_records import parse_replay_records
from runners.adapters.vllm_trace_records import parse_vllm_trace_records, records_lines
from runners.traces.fidelity import PlannedRequest, RequestRecord, check_fidelity

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-bench-trace"
CASES = ["mooncake-slice_v0.32.0_cpu", "one-refused_v0.32.0_cpu"]


def captured(case: str) -> bytes:
    return (FIXTURES / f"{case}.json").read_bytes()


def expected(case: str) -> list[dict]:
    return json.loads((FIXTURES / f"{case}.expected.json").read_text())


def trace_rows(case: str) -> list[dict]:
    text = (FIXTURES / f"{case}.timed-trace.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def same(got: object, want: object) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return got == want


@pytest.mark.parametrize("case", CASES)
def test_a_capture_reads_to_the_records_written_beside_it(case):
    records = parse_vllm_trace_records(captured(case), source=case)
    assert same(records, expected(case))


def test_each_record_is_the_trace_row_of_its_position_with_the_tokens_it_asked_for():
    rows = trace_rows(CASES[0])
    records = parse_vllm_trace_records(captured(CASES[0]))
    assert [r["prompt_tokens"] for r in records] == [row["input_length"] for row in rows]
    assert [r["output_tokens"] for r in records] == [row["output_length"] for row in rows]
    assert all(r["ok"] and len(r["itl_ms"]) == r["output_tokens"] - 1 for r in records)


def test_a_refused_request_is_failed_with_no_latency_rather_than_a_zero_one():
    records = parse_vllm_trace_records(captured(CASES[1]))
    refused = records[3]
    assert refused["ok"] is False and refused["ttft_ms"] is None and refused["e2el_ms"] is None
    assert [r["ok"] for r in records] == [True, True, True, False, True]


def test_the_records_pass_the_replay_records_reader_and_the_fidelity_check():
    rows = trace_rows(CASES[0])
    planned = [
        PlannedRequest(i, row["timestamp"], row["input_length"], row["output_length"])
        for i, row in enumerate(rows)
    ]
    records = parse_vllm_trace_records(captured(CASES[0]))
    run = parse_replay_records(records_lines(records))["runs"][0]
    assert run["completed"] == 12 and run["failed"] == 0
    fidelity = check_fidelity(planned, [RequestRecord.from_dict(r) for r in records])
    assert fidelity.prompt_token_mismatches == 0 and fidelity.output_token_mismatches == 0
    # Captured on a 2-core box beside the server: measured 3.5 ms at worst.
    assert fidelity.arrival_error_ms is not None and fidelity.arrival_error_ms["max"] < 10.0


def test_the_kept_result_still_reads_as_a_vllm_bench_run():
    (run,) = parse(captured(CASES[1]), tool="vllm-bench")["runs"]
    assert run["completed"] == 4 and run["failed"] == 1


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.pop("start_times"), "--save-detailed"),
        (lambda d: d["ttfts"].pop(), "differ in length"),
        (lambda d: d["input_lens"].__setitem__(0, -1), "input_lens[0]"),
        (lambda d: d["itls"].__setitem__(1, 0.5), "itls[1]"),
        (lambda d: d["ttfts"].__setitem__(2, "fast"), "ttfts[2]"),
    ],
)
def test_a_broken_result_is_refused_naming_the_field(change, problem):
    data = json.loads(captured(CASES[0]))
    change(data)
    with pytest.raises(AdapterError, match=re.escape(problem)) as raised:
        parse_vllm_trace_records(json.dumps(data), source="bench r1 result.json")
    assert str(raised.value).startswith("bench r1 result.json: ")


def test_an_empty_result_and_non_json_are_refused():
    empty = {key: [] for key in ("input_lens", "output_lens", "ttfts", "itls")}
    empty |= {"latencies": [], "start_times": [], "errors": []}
    with pytest.raises(AdapterError, match="no requests"):
        parse_vllm_trace_records(json.dumps(empty))
    with pytest.raises(AdapterError, match="not JSON"):
        parse_vllm_trace_records(b"Traceback (most recent call last):")
