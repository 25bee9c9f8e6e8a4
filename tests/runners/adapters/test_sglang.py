"""SGLang's outputs read into the shapes every engine shares: its /metrics (hit proof per tier,
KV cache size) and sglang.bench_serving's JSON lines.

The texts are written here from the metric names and result keys in sglang 0.5.23's own source
(srt/observability/metrics_collector.py, benchmark/serving.py), not captured from a GPU run:
no SGLang server ran here (docs/hosts.md, "SGLang")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners import results
from runners.adapters import AdapterError, detect, metrics_delta, parse

LABELS = 'model_name="m",tp_rank="{rank}"'


def scrape(*, prompt: float, device: float, host: float | None, load_back: float, hicache=True):
    lines = [
        "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE sglang:prompt_tokens_total counter",
        f'sglang:prompt_tokens_total{{model_name="m"}} {prompt}',
        "# TYPE sglang:cached_tokens_total counter",
        f'sglang:cached_tokens_total{{model_name="m",cache_source="device"}} {device}',
    ]
    if host is not None:
        lines.append(f'sglang:cached_tokens_total{{model_name="m",cache_source="host"}} {host}')
    lines += ["# TYPE sglang:max_total_num_tokens gauge"]
    lines += [f"sglang:max_total_num_tokens{{{LABELS.format(rank=r)}}} 50000" for r in (0, 1)]
    lines += ["# TYPE sglang:load_back_tokens_total counter"]
    # Every TP rank reports the same logical count: one rank's is read, not the sum.
    lines += [
        f'sglang:load_back_tokens_total{{{LABELS.format(rank=r)},pool="kv"}} {load_back}'
        for r in (0, 1)
    ]
    if hicache:
        lines += ["# TYPE sglang:hicache_host_total_tokens gauge"]
        lines += [f"sglang:hicache_host_total_tokens{{{LABELS.format(rank=0)}}} 100000"]
    lines += ["# TYPE sglang:num_running_reqs gauge", 'sglang:num_running_reqs{model_name="m"} 3']
    return "\n".join(lines) + "\n"


def test_a_scrape_is_detected_and_says_the_kv_size_and_the_host_tier():
    text = scrape(prompt=1000, device=100, host=300, load_back=300)
    assert detect(text) == "sglang-metrics"
    parsed = parse(text, tool="sglang-metrics")
    assert parsed["cache_config"]["kv_cache_size_tokens"] == 50000
    assert parsed["cache_config"]["offload_enabled"] is True
    assert parsed["prompt_tokens_cached_by_source"] == {"device": 100.0, "host": 300.0}
    counters = parsed["counters"]
    assert counters["prefix_cache_queries_tokens"] == 1000
    assert counters["prefix_cache_hits_tokens"] == 400
    assert counters["external_prefix_cache_queries_tokens"] == 900
    assert counters["external_prefix_cache_hits_tokens"] == 300
    assert counters["kv_offload_load_tokens"] == 300
    assert parsed["gauges"]["requests_running"] == 3


def test_the_host_tier_hit_rate_is_host_hits_over_what_the_gpu_did_not_hold():
    before = parse(scrape(prompt=1000, device=100, host=300, load_back=300), tool="sglang-metrics")
    after = parse(scrape(prompt=3000, device=200, host=1700, load_back=1700), tool="sglang-metrics")
    delta = metrics_delta(before, after)
    # 1900 prompt tokens the GPU did not hold, 1400 of them from the host tier.
    assert delta["external_prefix_cache_hit_rate"] == pytest.approx(1400 / 1900)
    facts = results.server_facts(before, after)
    assert facts["engine_metrics"] == "sglang-metrics"
    assert facts["offload_enabled"] is True
    assert facts["prefix_caching"] is None  # SGLang does not export whether its radix cache is on
    assert facts["offload_load_tokens"] == 1400


def test_a_server_without_hicache_ran_no_offload_tier():
    text = scrape(prompt=10, device=0, host=None, load_back=0, hicache=False)
    assert parse(text, tool="sglang-metrics")["cache_config"]["offload_enabled"] is False


def test_before_any_cached_token_the_labelled_counter_is_absent_and_reads_as_zero():
    text = "\n".join(
        [
            "# TYPE sglang:prompt_tokens_total counter",
            'sglang:prompt_tokens_total{model_name="m"} 42',
        ]
    )
    counters = parse(text, tool="sglang-metrics")["counters"]
    assert counters["external_prefix_cache_hits_tokens"] == 0
    assert counters["external_prefix_cache_queries_tokens"] == 42


def test_scrapes_of_two_engines_are_not_subtracted():
    vllm = parse(
        "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total 5\n", tool="vllm-metrics"
    )
    sglang = parse(scrape(prompt=1, device=0, host=0, load_back=0), tool="sglang-metrics")
    with pytest.raises(AdapterError, match="different engines"):
        metrics_delta(vllm, sglang)


def bench_line(**extra):
    # The keys sglang 0.5.23's benchmark/serving.py writes with --output-details.
    run = {
        "tag": None,
        "backend": "sglang-oai",
        "dataset_name": "generated-shared-prefix",
        "request_rate": float("inf"),
        "max_concurrency": 4,
        "server_info": None,
        "duration": 12.5,
        "completed": 3,
        "total_input_tokens": 300,
        "total_output_tokens": 96,
        "total_output_tokens_retokenized": 96,
        "request_throughput": 0.24,
        "input_throughput": 24.0,
        "output_throughput": 7.68,
        "total_throughput": 31.68,
        "mean_e2e_latency_ms": 900.0,
        "median_e2e_latency_ms": 880.0,
        "p99_e2e_latency_ms": 990.0,
        "mean_ttft_ms": 100.0,
        "median_ttft_ms": 90.0,
        "p99_ttft_ms": 150.0,
        "mean_tpot_ms": 25.0,
        "median_tpot_ms": 24.0,
        "mean_itl_ms": 25.0,
        "median_itl_ms": 24.0,
        "concurrency": 3.7,
        "max_output_tokens_per_s": 12.0,
        "max_concurrent_requests": 4,
        "input_lens": [100, 100, 100, 100],
        "output_lens": [32, 32, 32, 0],
        "ttfts": [0.1, 0.09, 0.11, 0.0],
        "itls": [[0.025], [0.024], [0.026], []],
        "errors": ["", "", "", "Internal Server Error"],
        **extra,
    }
    # Python's json writes an unlimited rate as the bare Infinity, as sglang's file holds it.
    return json.dumps(run)


def test_a_bench_serving_line_is_a_normalized_run_with_failures_from_its_errors():
    parsed = parse(bench_line(), tool="sglang-bench", source="result.json")
    (run,) = parsed["runs"]
    assert run["completed"] == 3 and run["failed"] == 1 and run["num_prompts"] == 4
    assert run["request_rate_unlimited"] is True
    assert run["e2el_ms"]["median"] == 880.0 and run["ttft_ms"]["p99"] == 150.0
    assert run["total_token_throughput"] == 31.68
    assert run["per_request"]["ttft_ms"][3] is None  # the failed request has no TTFT


def test_appended_runs_are_all_read_and_the_cell_takes_its_own_concurrency():
    text = bench_line(max_concurrency=1) + "\n" + bench_line(max_concurrency=4) + "\n"
    assert len(parse(text, tool="sglang-bench")["runs"]) == 2
    cell = results.Cell("offload", 4, 0)
    proof = results.bench_proof(text.encode(), cell=cell, source="r", tool="sglang-bench")
    assert proof.measurement is not None
    assert proof.measurement["metrics"]["max_concurrency"] == 4
    assert proof.artifacts[0].tool == "sglang-bench"


def test_a_line_without_completed_or_duration_is_refused_naming_the_line():
    text = bench_line() + "\n" + json.dumps({"backend": "sglang"}) + "\n"
    with pytest.raises(AdapterError, match="line 2"):
        parse(text, tool="sglang-bench", source="r.jsonl")


def test_an_engine_version_probe_reads_the_last_version_line():
    parsed = parse("some warning\n0.5.23\n", tool="engine-version")
    assert parsed["version"] == "0.5.23" and parsed["release"] == [0, 5, 23]
    facts = results.probe_facts("engine_version", "0.5.23\n")
    assert facts == {"engine_version": "0.5.23"}


def test_an_uploaded_bench_file_and_its_scrapes_are_read_by_their_content():
    cell = results.Cell("offload", 4, 0)
    before = scrape(prompt=0, device=0, host=0, load_back=0).encode()
    after = scrape(prompt=100, device=10, host=60, load_back=60).encode()
    assert detect(bench_line()) == "sglang-bench"
    proof = results.bench_files_proof(
        (bench_line().encode(), "r.jsonl"), cell=cell, before=(before, "b"), after=(after, "a")
    )
    assert proof.measurement is not None
    assert proof.measurement["server"]["external_hit_rate"] == pytest.approx(60 / 90)
    assert [a.tool for a in proof.artifacts] == ["sglang-bench", "sglang-metrics", "sglang-metrics"]


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang-bench"


@pytest.mark.parametrize(
    ("name", "dataset", "input_tokens", "median_ttft_ms", "p99_e2el_ms"),
    [
        ("random-ids", "random-ids", 1800, 78.33882499994616, 263.4397220497476),
        ("gsp", "generated-shared-prefix", 4512, 97.84353100008047, 102.11019775017576),
    ],
)
def test_the_real_bench_serving_files_read_as_written(
    name, dataset, input_tokens, median_ttft_ms, p99_e2el_ms
):
    # Values read off the captured files by hand (tests/fixtures/sglang-bench/PROVENANCE.md).
    raw = (FIXTURES / f"sglang-0.5.23_bench_serving_{name}_vs_simhost.jsonl").read_bytes()
    assert detect(raw) == "sglang-bench"
    (run,) = parse(raw, source=name)["runs"]
    assert (run["completed"], run["failed"], run["num_prompts"]) == (6, 0, 6)
    assert run["max_concurrency"] == 2 and run["request_rate_unlimited"] is True
    assert run["total_input_tokens"] == input_tokens and run["total_output_tokens"] == 48
    assert run["ttft_ms"]["median"] == median_ttft_ms
    assert run["e2el_ms"]["p99"] == p99_e2el_ms
    assert run["metadata"] == {"dataset_name": dataset}
    assert run["per_request"]["count"] == 6 and run["per_request"]["errors"] == 0


def lmcache_page(hit: float, asked: float) -> str:
    return "\n".join(
        [
            "# TYPE lmcache_mp_lookup_requested_tokens_total counter",
            f"lmcache_mp_lookup_requested_tokens_total {asked}",
            "# TYPE lmcache_mp_lookup_hit_tokens_total counter",
            f"lmcache_mp_lookup_hit_tokens_total {hit}",
            "# TYPE lmcache_mp_lookup_hit_l1_tokens_total counter",
            f"lmcache_mp_lookup_hit_l1_tokens_total {hit}",
        ]
    )


def test_lmcaches_lookup_counters_give_the_tiers_own_hit_rate():
    from runners.adapters.lmcache_metrics import lookup_hit_rate

    before = parse(lmcache_page(100, 1000))
    after = parse(lmcache_page(700, 2000))
    assert before["tool"] == "lmcache-metrics"
    assert after["counters"]["lookup_hit_l2_tokens"] is None
    assert lookup_hit_rate(before, after) == pytest.approx(0.6)
    assert lookup_hit_rate(after, before) is None  # counters went down: a restart
