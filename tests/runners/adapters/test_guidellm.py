"""guidellm: the three report layouts, strategy labels, and runs with nothing completed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from runners.adapters import AdapterError, parse
from runners.adapters.guidellm import parse_guidellm

FIXTURES = Path(__file__).parents[2] / "fixtures/guidellm"
V1 = json.loads(
    (
        FIXTURES
        / "danielkorat__guidellm-0.5.0.dev0__concurrent4__Qwen3-4B-Thinking-2507_tp4_fp8.json"
    ).read_text()
)
LEGACY = json.loads(
    (
        FIXTURES / "vllm-project-guidellm__legacy_v0.2-0.3_schema__benchmarks_stripped.json"
    ).read_text()
)


def _v2() -> dict:
    """The v1 report re-laid as schema v2 (0.7+): `args` renamed `config`, metadata.version 2."""
    report = copy.deepcopy(V1)
    report["metadata"]["version"] = 2
    report["metadata"]["guidellm_version"] = "0.7.3"
    report["config"] = report.pop("args")
    return report


def test_a_v2_report_is_read_like_v1_and_says_its_schema():
    v1 = parse_guidellm(json.dumps(V1))
    v2 = parse_guidellm(json.dumps(_v2()))
    assert (v2["schema"], v2["tool_version"]) == ("v2", "0.7.3")
    assert v2["runs"] == v1["runs"]


def test_an_unknown_schema_version_is_refused():
    report = copy.deepcopy(V1)
    report["metadata"]["version"] = 9
    with pytest.raises(AdapterError, match="unsupported GuideLLM report schema version 9"):
        parse_guidellm(json.dumps(report))


def test_request_latency_in_seconds_is_reported_in_milliseconds():
    run = parse_guidellm(json.dumps(LEGACY))["runs"][0]
    seconds = LEGACY["benchmarks"][0]["metrics"]["request_latency"]["successful"]["mean"]
    assert run["e2el_ms"]["mean"] == pytest.approx(seconds * 1000.0)


def test_the_legacy_layout_without_p50_takes_the_median_from_the_summary():
    stats = LEGACY["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]
    assert "p50" not in stats["percentiles"]
    run = parse_guidellm(json.dumps(LEGACY))["runs"][0]
    assert run["ttft_ms"]["median"] == stats["median"]
    assert "p50" not in run["ttft_ms"]


def test_a_report_with_no_successful_request_has_no_latency_summaries():
    report = copy.deepcopy(V1)
    totals = report["benchmarks"][0]["metrics"]["request_totals"]
    totals.update(successful=0, errored=4)
    run = parse_guidellm(json.dumps(report))["runs"][0]
    assert (run["completed"], run["failed"]) == (0, 4)
    assert all(run[group] is None for group in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"))


@pytest.mark.parametrize(
    ("strategy", "label", "concurrency", "rate"),
    [
        ({"type_": "constant", "rate": 1.5, "initial_burst": True}, "constant r=1.5", None, 1.5),
        ({"type_": "poisson", "rate": 4.0}, "poisson r=4", None, 4.0),
        ({"type_": "concurrent", "streams": 16}, "concurrent c=16", 16, None),
        ({"type_": "throughput", "max_concurrency": 64}, "throughput", 64, None),
        ({"type_": "synchronous"}, "synchronous", 1, None),
    ],
)
def test_each_strategy_gets_a_label_with_its_load_level(strategy, label, concurrency, rate):
    report = copy.deepcopy(LEGACY)
    report["benchmarks"][0]["args"]["strategy"] = strategy
    run = parse_guidellm(json.dumps(report))["runs"][0]
    assert (run["label"], run["max_concurrency"], run["request_rate"]) == (label, concurrency, rate)


def test_every_benchmark_of_a_sweep_becomes_one_run():
    report = copy.deepcopy(LEGACY)
    second = copy.deepcopy(report["benchmarks"][0])
    second["args"]["strategy"] = {"type_": "throughput"}
    report["benchmarks"].append(second)
    runs = parse(json.dumps(report))["runs"]
    assert [run["label"] for run in runs] == ["synchronous", "throughput"]
    assert runs[1]["request_rate_unlimited"] is True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(benchmarks=[]), "the report holds no benchmarks"),
        (lambda r: r["benchmarks"][0].pop("metrics"), r"benchmarks\[0\]\.metrics is missing"),
        (lambda r: r["benchmarks"][0].pop("request_totals"), "no request_totals"),
        (lambda r: r["benchmarks"][0].update(duration="long"), r"duration is the string 'long'"),
    ],
)
def test_broken_reports_are_refused_naming_the_place(change, message):
    report = copy.deepcopy(LEGACY)
    change(report)
    with pytest.raises(AdapterError, match=message):
        parse_guidellm(json.dumps(report))


@pytest.mark.parametrize("kind", ["constant", "poisson", "throughput"])
def test_guidellms_worker_cap_on_a_rate_strategy_is_not_a_concurrency_limit(kind):
    # GuideLLM 0.8 writes its worker cap (10240) into a strategy run without --max-concurrency.
    report = copy.deepcopy(LEGACY)
    report["benchmarks"][0]["args"]["strategy"] = {
        "type_": kind,
        "rate": 2.0,
        "max_concurrency": 10240,
    }
    run = parse_guidellm(json.dumps(report))["runs"][0]
    assert run["max_concurrency"] is None


def test_a_rate_strategy_reports_the_profiles_asked_for_concurrency():
    report = copy.deepcopy(LEGACY)
    benchmark = report["benchmarks"][0]["args"]
    benchmark["strategy"] = {"type_": "constant", "rate": 2.0, "max_concurrency": 10240}
    benchmark["profile"]["max_concurrency"] = 32
    run = parse_guidellm(json.dumps(report))["runs"][0]
    assert run["max_concurrency"] == 32
