"""Reads LMCache's multi-process server `/metrics` (its HTTP frontend, `--http-port`) into the
tier's own hit proof: lookup hits over requested tokens, in all and per level (L1, L2).

Names as lmcache 0.5.6's server prints them (`lmcache_mp_lookup_*_tokens_total`, captured in
tests/fixtures/lmcache-metrics/). Its counters are OpenTelemetry instruments, exported only once
something was added to them: a fresh server's page has no lookup series at all, so a counter
absent before a bench and present after it grew from 0. Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.vllm_metrics import read_samples, series_total

PREFIX = "lmcache_mp_"
COUNTERS = {
    "lookup_requested_tokens": "lmcache_mp_lookup_requested_tokens_total",
    "lookup_hit_tokens": "lmcache_mp_lookup_hit_tokens_total",
    "lookup_hit_l1_tokens": "lmcache_mp_lookup_hit_l1_tokens_total",
    "lookup_hit_l2_tokens": "lmcache_mp_lookup_hit_l2_tokens_total",
    "l1_read_chunks": "lmcache_mp_l1_read_chunks_total",
}


def parse_lmcache_metrics(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The scrape's lookup counters (docs/adapters.md, "lmcache-metrics"); None when absent."""
    with reading(source):
        samples = read_samples(decode(text))
        if not any(name.startswith(PREFIX) for name in samples):
            raise FormatProblem("no lmcache_mp_ series: not LMCache's multi-process /metrics")
        counters = {name: series_total(samples.get(sample)) for name, sample in COUNTERS.items()}
        return {"tool": "lmcache-metrics", "tool_version": None, "counters": counters}


def lookup_hit_rate(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """Hit tokens over requested tokens between two scrapes; None when unknown or nothing was
    looked up (a counter that went down, a restart, is unknown too)."""
    hits, asked = (
        _growth(before, after, key) for key in ("lookup_hit_tokens", "lookup_requested_tokens")
    )
    # More hits than lookups is no page LMCache writes: unknown, never a rate above one.
    if hits is None or asked is None or asked <= 0 or hits > asked:
        return None
    return float(hits / asked)


# The tokens one bench looked up and hit, by the name its facts give them.
LOOKUP_DELTAS = {
    "requested_tokens": "lookup_requested_tokens",
    "hit_tokens": "lookup_hit_tokens",
    "hit_l1_tokens": "lookup_hit_l1_tokens",
    "hit_l2_tokens": "lookup_hit_l2_tokens",
}


def lookup_facts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What LMCache's own counters say about one bench (a side service's facts in a cell's
    server facts): its lookup hit rate and the tokens looked up and hit, in all and per level;
    a counter absent from either scrape, or one that went down, is None."""
    deltas = {name: _growth(before, after, key) for name, key in LOOKUP_DELTAS.items()}
    return {
        "metrics_tool": "lmcache-metrics",
        "lookup_hit_rate": lookup_hit_rate(before, after),
        **deltas,
    }


def _growth(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    """How much one counter grew between two scrapes of the same server. Absent before and
    present after: it grew from 0 (nothing had been added to it yet). Absent after, or lower
    after than before (a restart): unknown."""
    old, new = before["counters"].get(key), after["counters"].get(key)
    if new is None:
        return None
    if old is None:
        old = 0.0
    if new < old:
        return None
    return float(new - old)
