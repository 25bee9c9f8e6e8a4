"""Reads LMCache's multi-process server `/metrics` (its HTTP frontend, `--http-port`) into the
tier's own hit proof: lookup hits over requested tokens, in all and per level (L1, L2).

Names as LMCache's MP observability docs give them (`lmcache_mp_lookup_*_tokens_total`); no page
of a running server was captured here (docs/hosts.md, "vLLM"). Pure: no I/O, no Django.
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
    old, new = before["counters"], after["counters"]
    values = [new.get(key) for key in ("lookup_hit_tokens", "lookup_requested_tokens")]
    values += [old.get(key) for key in ("lookup_hit_tokens", "lookup_requested_tokens")]
    if any(value is None for value in values):
        return None
    hits, asked = values[0] - values[2], values[1] - values[3]
    # More hits than lookups is no page LMCache writes: unknown, never a rate above one.
    if hits < 0 or asked <= 0 or hits > asked:
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
    deltas = {
        name: _delta(before["counters"].get(key), after["counters"].get(key))
        for name, key in LOOKUP_DELTAS.items()
    }
    return {
        "metrics_tool": "lmcache-metrics",
        "lookup_hit_rate": lookup_hit_rate(before, after),
        **deltas,
    }


def _delta(old: float | None, new: float | None) -> float | None:
    if old is None or new is None or new < old:
        return None
    return float(new - old)
