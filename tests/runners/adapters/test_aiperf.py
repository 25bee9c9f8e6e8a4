"""AIPerf's summary and per-request records, read from real `aiperf profile` captures
(tests/fixtures/aiperf/PROVENANCE.md) and from those captures changed one field at a time."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners import results
from runners.adapters import AdapterError, detect, parse
from runners.adapters.aiperf import LATENCIES
from runners.results import Cell, ResultError

FOLDER = Path(__file__).parents[2] / "fixtures" / "aiperf"
STEM = "aiperf-0.13.0_profile_completions"
C2 = json.loads((FOLDER / f"{STEM}_c2_vs_simhost.json").read_text())
ERRORS = FOLDER / f"{STEM}_c4_errors_vs_simhost"


def run_of(summary: dict) -> dict:
    (run,) = parse(json.dumps(summary), tool="aiperf", source="s.json")["runs"]
    return run


def refusal(summary: object) -> str:
    with pytest.raises(AdapterError) as raised:
        parse(json.dumps(summary), tool="aiperf", source="s.json")
    return str(raised.value)


def changed(**fields: object) -> dict:
    summary = copy.deepcopy(C2)
    summary.update(fields)
    return summary


def test_a_summary_with_errors_counts_successes_as_completed_and_errors_as_failed():
    (run,) = parse((FOLDER / f"{ERRORS.name}.json").read_bytes())["runs"]
    # AIPerf's completed_request_count (16) is successes plus errors: not vLLM's `completed`.
    assert (run["completed"], run["failed"], run["num_prompts"]) == (11, 5, 16)
    assert run["error_summary"] == [{"code": 500, "type": "Internal Server Error", "count": 5}]


def test_the_summary_and_the_records_of_one_run_agree():
    (run,) = parse((FOLDER / f"{ERRORS.name}.json").read_bytes())["runs"]
    records = parse((FOLDER / f"{ERRORS.name}.records.jsonl").read_bytes())["per_request"]
    ttfts = [value for value in records["ttft_ms"] if value is not None]
    assert records["count"] - records["errors"] == run["completed"] == len(ttfts)
    assert records["errors"] == run["failed"]
    assert statistics.median(ttfts) == pytest.approx(run["ttft_ms"]["median"])
    assert statistics.fmean(ttfts) == pytest.approx(run["ttft_ms"]["mean"])


def test_a_summary_without_error_request_count_failed_none_of_its_requests():
    run = run_of(C2)
    assert "error_request_count" not in C2
    assert (run["completed"], run["failed"]) == (16, 0)


def test_a_latency_in_seconds_is_converted_to_the_same_milliseconds():
    summary = copy.deepcopy(C2)
    metric = summary["time_to_first_token"]
    seconds = {k: v / 1000 if isinstance(v, float) else v for k, v in metric.items()}
    summary["time_to_first_token"] = {**seconds, "unit": "sec"}
    assert run_of(summary)["ttft_ms"] == pytest.approx(run_of(C2)["ttft_ms"])


@pytest.mark.parametrize(
    ("metric", "unit", "named"),
    [
        ("time_to_first_token", "furlongs", "time_to_first_token.unit is 'furlongs'"),
        ("request_throughput", "requests/min", "request_throughput.unit is 'requests/min'"),
        ("output_token_throughput", "tokens/sec/user", "output_token_throughput.unit"),
        ("request_count", "tokens", "request_count.unit is 'tokens', expected requests"),
        ("benchmark_duration", "fortnights", "benchmark_duration.unit is 'fortnights'"),
    ],
)
def test_a_metric_in_a_unit_not_known_here_is_refused_naming_the_field(metric, unit, named):
    summary = copy.deepcopy(C2)
    summary[metric]["unit"] = unit
    assert named in refusal(summary)


def test_a_metric_without_its_unit_is_refused_rather_than_assumed_ms():
    summary = copy.deepcopy(C2)
    del summary["request_latency"]["unit"]
    assert "request_latency.unit is missing" in refusal(summary)


@pytest.mark.parametrize("missing", ["request_count", "benchmark_duration"])
def test_a_summary_without_a_required_metric_is_refused_naming_it(missing):
    summary = copy.deepcopy(C2)
    del summary[missing]
    assert f"{missing} is missing" in refusal(summary)


def test_a_summary_of_only_failures_without_request_count_reports_0_completed():
    summary = changed(
        completed_request_count={"unit": "requests", "avg": 4.0},
        error_request_count={"unit": "requests", "avg": 4.0},
    )
    del summary["request_count"]
    run = run_of(summary)
    assert (run["completed"], run["failed"]) == (0, 4)
    assert run["ttft_ms"] is None  # no completed request: no latency, never 0 ms


@pytest.mark.parametrize(
    "fields", [{"was_cancelled": True}, {"is_complete": False}], ids=["cancelled", "incomplete"]
)
def test_a_benchmark_that_stopped_early_is_refused(fields):
    assert "stopped early" in refusal(changed(**fields))


def test_another_schema_major_version_is_refused():
    assert "schema_version is '2.0'" in refusal(changed(schema_version="2.0"))


def test_a_vllm_bench_result_named_as_aiperf_is_refused_as_not_an_aiperf_summary():
    vllm = {"completed": 3, "duration": 1.0, "request_throughput": 3.0}
    assert "not an AIPerf summary" in refusal(vllm)


def test_the_summary_is_detected_as_aiperf_though_it_holds_request_throughput():
    assert detect(json.dumps(C2)) == "aiperf"


def test_records_of_a_warmup_phase_are_not_measured():
    lines = (FOLDER / f"{STEM}_c2_vs_simhost.records.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["metadata"]["benchmark_phase"] = "warmup"
    text = "\n".join([json.dumps(first), *lines[1:]])
    assert parse(text, tool="aiperf-records")["per_request"]["count"] == len(lines) - 1


def test_a_record_with_an_unknown_time_unit_is_refused():
    line = json.loads((FOLDER / f"{STEM}_c2_vs_simhost.records.jsonl").read_text().splitlines()[0])
    line["metrics"]["request_latency"]["unit"] = "ticks"
    with pytest.raises(AdapterError, match=r"request_latency\.unit is 'ticks'"):
        parse(json.dumps(line), tool="aiperf-records")


def test_bench_proof_reads_an_aiperf_cell_at_its_concurrency():
    raw = (FOLDER / f"{STEM}_c8_vs_simhost.json").read_bytes()
    proof = results.bench_proof(raw, cell=Cell("resident", 8, 0), source="r.json", tool="aiperf")
    assert proof.measurement is not None
    metrics = proof.measurement["metrics"]
    assert (metrics["max_concurrency"], metrics["completed"], metrics["failed"]) == (8, 32, 0)
    assert proof.artifacts[0].tool == "aiperf"


def test_bench_proof_refuses_an_aiperf_file_of_another_concurrency():
    raw = (FOLDER / f"{STEM}_c8_vs_simhost.json").read_bytes()
    with pytest.raises(ResultError, match="expected one run at concurrency 2"):
        results.bench_proof(raw, cell=Cell("resident", 2, 0), source="r.json", tool="aiperf")


@settings(max_examples=60, deadline=None)
@given(
    group=st.sampled_from(sorted(LATENCIES)), unit=st.sampled_from(["ns", "us", "ms", "s", "sec"])
)
def test_any_time_unit_gives_the_milliseconds_of_the_captured_values(group, unit):
    per_ms = {"ns": 1e6, "us": 1e3, "ms": 1.0, "s": 1e-3, "sec": 1e-3}[unit]
    summary = copy.deepcopy(C2)
    metric = summary[LATENCIES[group]]
    scaled = {k: v * per_ms for k, v in metric.items() if k not in ("unit", "count")}
    summary[LATENCIES[group]] = {**metric, **scaled, "unit": unit}
    assert run_of(summary)[group] == pytest.approx(run_of(C2)[group], rel=1e-9)


def test_a_warmup_phase_is_neither_the_measured_concurrency_nor_a_measured_record():
    stem = FOLDER / f"{STEM}_c2_warmup4_vs_simhost"
    summary = json.loads((stem.parent / f"{stem.name}.json").read_text())
    assert [phase["kind"] for phase in summary["input_config"]["phases"]] == ["warmup", "profiling"]
    (run,) = parse(json.dumps(summary))["runs"]
    assert (run["num_prompts"], run["completed"], run["max_concurrency"]) == (8, 8, 2)
    records = parse((stem.parent / f"{stem.name}.records.jsonl").read_bytes())["per_request"]
    assert records["count"] == 8  # of the 12 lines, 4 are the warm-up's


def test_a_poisson_phase_reports_its_rate_and_its_concurrency_cap():
    (run,) = parse((FOLDER / f"{STEM}_poisson_r20_c4_vs_simhost.json").read_bytes())["runs"]
    assert (run["request_rate"], run["request_rate_unlimited"]) == (20.0, False)
    assert (run["max_concurrency"], run["phase_type"]) == (4, "poisson")
