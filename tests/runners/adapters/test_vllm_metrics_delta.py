"""metrics_delta: counter differences, hit rates over an interval, restarts refused."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from runners.adapters import AdapterError, CounterResetError, metrics_delta, parse

FIXTURES = Path(__file__).parents[2] / "fixtures/vllm-metrics"
IDLE = parse((FIXTURES / "er0080__metrics_vllm_0.25.1_idle.txt").read_bytes())
LOADED = parse((FIXTURES / "er0080__metrics_vllm_0.25.1_loaded_128conc.txt").read_bytes())


def _with(scrape: dict, **counters: float | None) -> dict:
    changed = copy.deepcopy(scrape)
    changed["counters"].update(counters)
    return changed


def test_the_interval_from_idle_to_loaded_has_the_loaded_counts_and_local_hit_rate():
    delta = metrics_delta(IDLE, LOADED)
    assert delta["counters"]["prefix_cache_queries_tokens"] == 339968.0
    assert delta["prefix_cache_hit_rate"] == pytest.approx(2480.0 / 339968.0)
    assert delta["requests_finished"] == 600.0
    assert delta["requests_failed"] == 0.0
    assert delta["histograms"]["ttft_s"]["mean"] == pytest.approx(88.24499082565308 / 664.0)


def test_no_external_queries_gives_no_external_hit_rate_rather_than_zero():
    delta = metrics_delta(IDLE, LOADED)
    assert delta["counters"]["external_prefix_cache_queries_tokens"] == 0.0
    assert delta["external_prefix_cache_hit_rate"] is None


def test_the_external_hit_rate_is_external_hits_over_external_queries_in_the_interval():
    before = _with(
        LOADED, external_prefix_cache_queries_tokens=1000.0, external_prefix_cache_hits_tokens=100.0
    )
    after = _with(
        LOADED,
        prefix_cache_queries_tokens=339968.0 + 50000.0,
        external_prefix_cache_queries_tokens=41000.0,
        external_prefix_cache_hits_tokens=30100.0,
    )
    delta = metrics_delta(before, after)
    assert delta["external_prefix_cache_hit_rate"] == pytest.approx(30000.0 / 40000.0)
    assert delta["external_share_of_prompt_tokens"] == pytest.approx(30000.0 / 50000.0)


def test_a_series_missing_from_either_scrape_gives_null_not_zero():
    delta = metrics_delta(IDLE, LOADED)
    assert delta["counters"]["kv_offload_load_bytes"] is None
    older = _with(IDLE, external_prefix_cache_hits_tokens=None)
    assert metrics_delta(older, LOADED)["external_prefix_cache_hit_rate"] is None


def test_a_counter_that_went_down_means_a_restart_and_is_refused():
    with pytest.raises(
        CounterResetError, match="counter prefix_cache_queries_tokens went down from 339968 to 0"
    ):
        metrics_delta(LOADED, IDLE)


def test_a_changed_process_start_time_means_a_restart_even_if_counters_grew():
    after = copy.deepcopy(LOADED)
    after["gauges"]["process_start_time_s"] += 60.0
    with pytest.raises(CounterResetError, match="restarted between the scrapes"):
        metrics_delta(IDLE, after)


def test_anything_but_two_parsed_scrapes_is_refused():
    with pytest.raises(AdapterError, match="before is not an engine metrics result"):
        metrics_delta({"tool": "vllm-bench"}, LOADED)
