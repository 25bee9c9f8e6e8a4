"""LMCache's multi-process /metrics read into the tier's own facts about one bench. The pages
are written from the series names LMCache's MP observability docs give (no capture here:
docs/adapters.md, "lmcache-metrics")."""

from __future__ import annotations

import pytest

from runners.adapters import AdapterError, parse
from runners.adapters.lmcache_metrics import lookup_facts, lookup_hit_rate


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
