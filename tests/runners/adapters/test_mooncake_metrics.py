"""The Mooncake master's /metrics: a real 0.3.13.post1 page and simhost's double's."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.adapters import AdapterError, detect, parse
from runners.adapters.mooncake_metrics import store_facts
from runners.results import service_facts
from simhost.mooncake import engine_tokens, master_page

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mooncake-metrics"
REAL = (FIXTURES / "real__mooncake_master_0.3.13.post1_idle.txt").read_text()


def test_a_real_masters_page_is_detected_and_read():
    assert detect(REAL) == "mooncake-metrics"
    read = parse(REAL)
    assert read["gauges"] == {
        "key_count": 0.0,
        "allocated_bytes": 0.0,
        "capacity_bytes": 0.0,
        "active_clients": 0.0,
    }
    assert set(read["counters"].values()) == {0.0}


def test_simhosts_master_reads_the_same_and_its_facts_are_the_growth_between_scrapes():
    before = parse(master_page(1000, 200))
    after = parse(master_page(3000, 1400))
    facts = service_facts("mooncake-metrics", before, after)
    assert facts == store_facts(before, after)
    assert facts["exist_key_items"] == 2000 and facts["get_replica_list_items"] == 1200
    assert facts["put_start_items"] == 800 and facts["key_count"] == 1600
    # Keys, not prompt tokens: never a hit rate to judge the tier by.
    assert facts["lookup_hit_rate"] is None


def test_a_counter_that_went_down_is_unknown_and_a_foreign_page_is_refused():
    facts = store_facts(parse(master_page(3000, 1400)), parse(master_page(10, 0)))
    assert facts["exist_key_items"] is None
    with pytest.raises(AdapterError, match="master_key_count"):
        parse("# TYPE x counter\nx_total 1\n", tool="mooncake-metrics")


def test_the_double_reads_vllm_and_sglang_engines():
    vllm = 'vllm:external_prefix_cache_queries_total{engine="0"} 300\n'
    vllm += 'vllm:external_prefix_cache_hits_total{engine="0"} 120\n'
    assert engine_tokens(vllm) == (300, 120)
    sglang = "sglang:prompt_tokens_total 1000\n"
    sglang += 'sglang:cached_tokens_total{cache_source="device"} 400\n'
    sglang += 'sglang:cached_tokens_total{cache_source="host"} 250\n'
    sglang += 'sglang:cached_tokens_total{cache_source="storage"} 50\n'
    assert engine_tokens(sglang) == (600, 300)
