"""LMCache's multi-process /metrics read into the tier's own facts about one bench: the real
server's pages (lmcache 0.5.6, captured before and after LMCache's own client bench:
tests/fixtures/lmcache-metrics/PROVENANCE.md), and pages written with its series names for the
cases no capture shows."""

from __future__ import annotations

import pytest

from runners.adapters import AdapterError, parse
from runners.adapters.lmcache_metrics import lookup_facts, lookup_hit_rate
from tests.runners.adapters.golden import FIXTURES

REAL = FIXTURES / "lmcache-metrics"
REAL_BEFORE = (REAL / "lmcache-0.5.6__server_before.txt").read_text()
REAL_AFTER = (REAL / "lmcache-0.5.6__server_after.txt").read_text()


def page(asked: float, hit: float, l1: float | None = None, l2: float | None = None) -> str:
    lines = [
        "# TYPE lmcache_mp_lookup_requested_tokens_total counter",
        f"lmcache_mp_lookup_requested_tokens_total {asked}",
        "# TYPE lmcache_mp_lookup_hit_tokens_total counter",
        f"lmcache_mp_lookup_hit_tokens_total {hit}",
    ]
    if l1 is not None:
        lines.append(f"lmcache_mp_lookup_hit_l1_tokens_total {l1}")
    if l2 is not None:
        lines.append(f"lmcache_mp_lookup_hit_l2_tokens_total {l2}")
    return "\n".join(lines) + "\n"


def test_a_benchs_lookup_facts_are_the_counters_growth_between_its_scrapes():
    before = parse(page(1000, 100, l1=100, l2=0), tool="lmcache-metrics")
    after = parse(page(3000, 1300, l1=1000, l2=300), tool="lmcache-metrics")
    assert lookup_facts(before, after) == {
        "metrics_tool": "lmcache-metrics",
        "lookup_hit_rate": pytest.approx(0.6),
        "requested_tokens": 2000.0,
        "hit_tokens": 1200.0,
        "hit_l1_tokens": 900.0,
        "hit_l2_tokens": 300.0,
    }


def test_a_level_the_page_does_not_split_is_unknown_not_zero():
    before = parse(page(0, 0), tool="lmcache-metrics")
    after = parse(page(10, 5), tool="lmcache-metrics")
    facts = lookup_facts(before, after)
    assert (facts["hit_l1_tokens"], facts["hit_l2_tokens"]) == (None, None)
    assert facts["lookup_hit_rate"] == 0.5


def test_a_restart_between_the_scrapes_makes_every_fact_unknown():
    before = parse(page(3000, 1300, l1=1000), tool="lmcache-metrics")
    after = parse(page(10, 5, l1=5), tool="lmcache-metrics")
    facts = lookup_facts(before, after)
    assert facts["lookup_hit_rate"] is None
    assert facts["requested_tokens"] is None and facts["hit_l1_tokens"] is None


@pytest.mark.parametrize(("asked", "hit"), [(0, 0), (100, 150)])
def test_nothing_looked_up_or_more_hits_than_lookups_is_no_rate(asked, hit):
    before = parse(page(0, 0), tool="lmcache-metrics")
    assert lookup_hit_rate(before, parse(page(asked, hit), tool="lmcache-metrics")) is None


def test_a_page_without_lmcaches_series_is_refused():
    with pytest.raises(AdapterError, match="not LMCache"):
        parse("vllm:num_requests_running 0\n", tool="lmcache-metrics")


def test_a_fresh_real_servers_page_is_lmcaches_with_no_lookup_counter_yet():
    before = parse(REAL_BEFORE, tool="lmcache-metrics")
    assert before["tool"] == "lmcache-metrics"
    # OpenTelemetry exports a counter only once something was added to it.
    assert before["counters"] == dict.fromkeys(before["counters"])


def test_the_real_servers_counters_are_read_summed_over_their_labels():
    after = parse(REAL_AFTER, tool="lmcache-metrics")
    assert after["counters"] == {
        "lookup_requested_tokens": 4096.0,
        "lookup_hit_tokens": 1024.0,
        "lookup_hit_l1_tokens": 1024.0,
        "lookup_hit_l2_tokens": 0.0,
        "l1_read_chunks": 4.0,
    }


def test_counters_absent_before_the_bench_and_present_after_it_count_from_zero():
    before = parse(REAL_BEFORE, tool="lmcache-metrics")
    after = parse(REAL_AFTER, tool="lmcache-metrics")
    assert lookup_facts(before, after) == {
        "metrics_tool": "lmcache-metrics",
        "lookup_hit_rate": 0.25,
        "requested_tokens": 4096.0,
        "hit_tokens": 1024.0,
        "hit_l1_tokens": 1024.0,
        "hit_l2_tokens": 0.0,
    }


def test_counters_present_before_and_absent_after_are_unknown_not_a_fall_to_zero():
    before = parse(REAL_AFTER, tool="lmcache-metrics")
    after = parse(REAL_BEFORE, tool="lmcache-metrics")
    facts = lookup_facts(before, after)
    assert facts["lookup_hit_rate"] is None
    assert facts["requested_tokens"] is None and facts["hit_l1_tokens"] is None


def test_a_hit_counter_on_neither_page_is_unknown_and_so_is_the_rate():
    # Not a page 0.5.6 writes (it adds to all four lookup counters at once), but a gap here
    # must read as unknown, never as no hits.
    before = parse(REAL_BEFORE, tool="lmcache-metrics")
    after = parse(page_without_hits(4096), tool="lmcache-metrics")
    facts = lookup_facts(before, after)
    assert facts["requested_tokens"] == 4096.0
    assert facts["hit_tokens"] is None and facts["lookup_hit_rate"] is None


def page_without_hits(asked: float) -> str:
    return (
        "# TYPE lmcache_mp_lookup_requested_tokens_total counter\n"
        f'lmcache_mp_lookup_requested_tokens_total{{cache_salt="",model_name="m"}} {asked}\n'
    )
