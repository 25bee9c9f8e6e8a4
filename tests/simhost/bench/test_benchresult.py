"""The bench result file against real `vllm bench serve --save-result` files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost.bench.args import bench_settings
from simhost.bench.result import (
    RequestOutcome,
    build_result,
    percentile,
    percentile_key,
    render_summary,
)
from simhost.bench.run import _metadata
from simhost.cli import build_parser
from tests.simhost.conftest import FIXTURES


def _settings(*flags: str):
    return bench_settings(build_parser().parse_args(["bench", "--model", "m", *flags]))


def _outcome(ttft: float, gaps, start: float = 0.0, success: bool = True) -> RequestOutcome:
    outcome = RequestOutcome(prompt_len=100, start_time=start, success=success)
    if success:
        outcome.ttft = ttft
        outcome.itl = list(gaps)
        outcome.latency = ttft + sum(gaps)
        outcome.output_tokens = len(gaps) + 1
        outcome.generated_text = "x" * outcome.output_tokens
    else:
        outcome.error = "HTTP 500"
    return outcome


def _result(settings, outcomes, duration=2.0):
    return build_result(
        _metadata(settings, len(outcomes)),
        outcomes,
        duration,
        settings.percentile_metrics,
        settings.metric_percentiles,
        settings.save_detailed,
    )


def _real(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_the_default_result_has_exactly_the_keys_of_a_real_vllm_result():
    result = _result(_settings("--max-concurrency", "2"), [_outcome(0.2, [0.01, 0.02])])
    real = _real("er0080__bench_serve_v0.25.1__opt-125m_cpu.json")
    assert set(result) == set(real)


def test_asking_for_e2el_adds_the_keys_a_real_sweep_run_has():
    settings = _settings("--percentile-metrics", "ttft,tpot,itl,e2el")
    real = _real("er0080__sweep_v0.25.1__max_num_seqs4_conc2__run0.json")
    sweep_only = {"run_number", "max_num_seqs"}
    assert set(_result(settings, [_outcome(0.2, [0.01])])) == set(real) - sweep_only


def test_every_request_failing_gives_zeros_like_real_vllm_and_the_same_keys():
    outcomes = [_outcome(0, [], success=False) for _ in range(8)]
    result = _result(_settings(), outcomes)
    real = _real("er0080__bench_serve_all_requests_failed_v0.25.1.json")
    assert set(result) == set(real)
    assert (result["completed"], result["failed"], result["mean_ttft_ms"]) == (0, 8, 0.0)
    assert result["max_concurrency"] is None and result["request_rate"] == "inf"


def test_aggregates_are_in_milliseconds_and_arrays_in_seconds():
    outcomes = [_outcome(0.5, [0.1, 0.1]), _outcome(0.3, [0.2])]
    result = _result(_settings("--save-detailed"), outcomes)
    assert result["mean_ttft_ms"] == pytest.approx(400.0)
    assert result["median_tpot_ms"] == pytest.approx(150.0)  # (0.1, 0.2) s per token
    assert result["ttfts"] == [0.5, 0.3]
    assert result["itls"] == [[0.1, 0.1], [0.2]]
    # vLLM 0.32 writes per-request latencies and client queue times too.
    assert result["latencies"] == [o.latency for o in outcomes]
    assert result["queue_times"] == [0.0, 0.0]
    assert result["output_lens"] == [3, 2]
    assert result["total_output_tokens"] == 5
    assert result["output_throughput"] == pytest.approx(2.5)


def test_percentile_keys_follow_vllms_naming():
    settings = _settings("--metric-percentiles", "50,90,99.9")
    result = _result(settings, [_outcome(0.1 * i, [0.01]) for i in range(1, 11)])
    assert {"p50_ttft_ms", "p90_ttft_ms", "p99.9_ttft_ms"} <= set(result)
    assert percentile_key(99.0) == "99" and percentile_key(99.9) == "99.9"


def test_detailed_arrays_are_left_out_unless_asked_for():
    result = _result(_settings(), [_outcome(0.1, [0.01])])
    assert not {"ttfts", "itls", "input_lens", "generated_texts", "errors"} & set(result)


def test_peaks_count_tokens_and_requests_per_one_second_bucket():
    outcomes = [_outcome(0.1, [0.1] * 9, start=0.0), _outcome(0.1, [0.1] * 9, start=2.5)]
    result = _result(_settings(), outcomes)
    assert result["max_output_tokens_per_s"] == 10.0
    assert result["max_concurrent_requests"] == 1


@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=60), st.floats(0, 100))
def test_the_percentile_matches_numpy(values, pct):
    assert percentile(values, pct) == pytest.approx(float(np.percentile(values, pct)), abs=1e-6)


def test_the_summary_prints_vllms_labels():
    settings = _settings("--max-concurrency", "4")
    summary = render_summary(
        _result(settings, [_outcome(0.2, [0.01])]), settings.percentile_metrics
    )
    assert "Successful requests:" in summary and "Maximum request concurrency:" in summary
    assert "P99 TTFT (ms):" in summary
    assert summary.splitlines()[0] == "============ Serving Benchmark Result ============"
