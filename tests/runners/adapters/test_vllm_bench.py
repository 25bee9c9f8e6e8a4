"""vllm-bench: JSON lines, sweeps, version differences, per-request arrays, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.adapters import AdapterError, parse
from runners.adapters.vllm_bench import parse_vllm_bench

FIXTURES = Path(__file__).parents[2] / "fixtures/vllm-bench"
NORMAL = json.loads((FIXTURES / "er0080__bench_serve_v0.25.1__opt-125m_cpu.json").read_text())
FAILED = (FIXTURES / "er0080__bench_serve_all_requests_failed_v0.25.1.json").read_text()


def _line(payload: dict) -> str:
    # vLLM writes one compact line per run (json.dump, no indent).
    return json.dumps(payload)


def _run(**changes) -> dict:
    payload = dict(NORMAL)
    for key, value in changes.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value
    return payload


def test_an_append_result_file_gives_one_run_per_line_in_order():
    text = "\n".join([_line(_run(label="first")), FAILED.strip(), _line(_run(label="third"))])
    runs = parse(text)["runs"]
    assert [run["label"] for run in runs] == ["first", None, "third"]
    assert [run["completed"] for run in runs] == [8, 0, 8]


def test_a_truncated_last_line_of_a_json_lines_file_is_refused_naming_the_line():
    text = _line(_run()) + "\n" + _line(_run())[:50] + "\n"
    with pytest.raises(AdapterError, match=r"^runs\.jsonl: line 2: not valid JSON"):
        parse_vllm_bench(text, source="runs.jsonl")


def test_a_run_inside_a_json_lines_file_is_named_by_its_line_when_refused():
    text = _line(_run()) + "\n\n" + _line(_run(completed=None))
    with pytest.raises(AdapterError, match=r"^<input>: line 3: completed is missing$"):
        parse_vllm_bench(text)


def test_a_numeric_request_rate_is_kept_and_inf_is_reported_as_unlimited():
    limited = parse_vllm_bench(_line(_run(request_rate=2.5)))["runs"][0]
    unlimited = parse_vllm_bench(_line(_run(request_rate="inf")))["runs"][0]
    assert (limited["request_rate"], limited["request_rate_unlimited"]) == (2.5, False)
    assert (unlimited["request_rate"], unlimited["request_rate_unlimited"]) == (None, True)


def test_a_request_rate_that_is_some_other_string_is_refused():
    with pytest.raises(AdapterError, match="request_rate is the string 'fast'"):
        parse_vllm_bench(_line(_run(request_rate="fast")))


def test_before_0_12_failed_is_derived_from_num_prompts_minus_completed():
    run = parse_vllm_bench(_line(_run(failed=None, num_prompts=10, completed=7)))["runs"][0]
    assert run["failed"] == 3


def test_failed_stays_unknown_when_neither_failed_nor_num_prompts_is_there():
    run = parse_vllm_bench(_line(_run(failed=None, num_prompts=None)))["runs"][0]
    assert run["failed"] is None


def test_a_missing_goodput_or_aggregate_is_null_never_zero():
    run = parse_vllm_bench(_line(_run(p99_ttft_ms=None, request_goodput=None)))["runs"][0]
    assert run["request_goodput"] is None
    assert "p99" not in run["ttft_ms"]
    assert run["e2el_ms"] is None


def test_fractional_percentiles_and_client_queue_metrics_keep_their_names():
    extra = {"p99.9_ttft_ms": 900.5, "p50_ttft_ms": 55.0, "mean_client_queue_time_ms": 3.5}
    run = parse_vllm_bench(_line({**NORMAL, **extra}))["runs"][0]
    assert run["ttft_ms"]["p99.9"] == 900.5
    assert run["ttft_ms"]["p50"] == 55.0
    assert run["client_queue_time_ms"] == {"mean": 3.5}


def test_a_file_with_only_duration_is_refused_naming_completed():
    with pytest.raises(AdapterError, match="completed is missing"):
        parse_vllm_bench(_line(_run(completed=None)))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"completed": -1}, "completed is negative"),
        ({"completed": 2.5}, "completed is 2.5, expected a whole number"),
        ({"completed": True}, "completed is true, expected a number"),
        ({"duration": "1.5"}, "duration is the string '1.5', expected a number"),
        ({"mean_ttft_ms": float("nan")}, "mean_ttft_ms is nan, expected a finite number"),
        ({"output_throughput": 1e400}, "output_throughput is inf, expected a finite number"),
    ],
)
def test_wrong_values_are_refused_naming_the_field(changes, message):
    with pytest.raises(AdapterError, match=message):
        parse_vllm_bench(json.dumps(_run(**changes)))


def test_an_empty_sweep_summary_is_refused():
    with pytest.raises(AdapterError, match="the list holds no runs"):
        parse_vllm_bench("[]")


def _detailed() -> dict:
    """A 0.33 `--save-detailed` payload, laid out as formats.md §1.2 describes (seconds)."""
    return _run(
        completed=2,
        failed=1,
        num_prompts=3,
        ttfts=[0.25, 0.0, 0.125],
        latencies=[1.5, 0.0, 2.0],
        itls=[[0.01, 0.02], [], [0.03]],
        queue_times=[0.0, 0.5, 0.25],
        server_ttfts=[0.2, None, 0.1],
        input_lens=[32, 32, 32],
        output_lens=[3, 0, 2],
        errors=["", "Server disconnected", ""],
    )


def test_per_request_arrays_in_seconds_come_out_in_milliseconds():
    detail = parse_vllm_bench(_line(_detailed()))["runs"][0]["per_request"]
    assert detail["ttft_ms"] == [250.0, None, 125.0]
    assert detail["e2el_ms"] == [1500.0, None, 2000.0]
    assert detail["itl_ms"] == [[10.0, 20.0], None, [30.0]]
    assert detail["client_queue_ms"] == [0.0, 500.0, 250.0]
    assert detail["server_ttft_ms"] == [200.0, None, 100.0]
    assert (detail["count"], detail["errors"]) == (3, 1)
    assert detail["output_tokens"] == [3, 0, 2]


def test_a_failed_request_without_an_errors_array_is_recognized_by_its_zero_latency():
    # From 0.30 a plain --save-result keeps `latencies` but drops `errors`.
    payload = _run(failed=1, latencies=[1.5, 0.0], queue_times=[0.0, 0.1])
    detail = parse_vllm_bench(_line(payload))["runs"][0]["per_request"]
    assert detail["e2el_ms"] == [1500.0, None]
    assert detail["errors"] is None


def test_per_request_arrays_of_different_lengths_are_refused():
    with pytest.raises(AdapterError, match="per-request arrays differ in length"):
        parse_vllm_bench(_line(_run(ttfts=[0.1, 0.2], latencies=[1.0])))


def test_a_per_request_entry_that_is_not_a_number_is_refused_naming_it():
    with pytest.raises(AdapterError, match=r"ttfts\[1\] is the string 'x'"):
        parse_vllm_bench(_line(_run(ttfts=[0.1, "x"])))


def test_metadata_keys_are_kept_as_text_and_the_tools_own_text_keys_are_not():
    # vLLM writes `--metadata arm=resident tier=8` as top-level strings after num_prompts.
    payload = {**NORMAL, "arm": "resident", "tier": "8", "tokenizer_id": "/models/x"}
    (run,) = parse_vllm_bench(json.dumps(payload))["runs"]
    assert run["metadata"] == {"arm": "resident", "tier": "8"}


def test_a_run_without_metadata_has_no_metadata_key():
    (run,) = parse_vllm_bench(json.dumps(NORMAL))["runs"]
    assert "metadata" not in run
