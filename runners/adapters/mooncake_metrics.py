"""Reads the Mooncake store master's `/metrics` (its `--metrics_port`) into what the store held
and served around one bench: keys, bytes allocated, and the items put, looked up and fetched.

Names from a real mooncake_master 0.3.13.post1 page (tests/fixtures/mooncake-metrics). The
master counts keys and requests, not the engine's tokens, so it says the store was used, not
which share of a request's prompt it served: the engine's own counters stay the hit proof
(docs/hosts.md, "Mooncake store"). Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.vllm_metrics import read_samples, series_total

MARKER = "master_key_count"
GAUGES = {
    "key_count": "master_key_count",
    "allocated_bytes": "master_allocated_bytes",
    "capacity_bytes": "master_total_capacity_bytes",
    "active_clients": "master_active_clients",
}
COUNTERS = {
    "put_start_items": "master_batch_put_start_items_total",
    "exist_key_items": "master_batch_exist_key_items_total",
    "get_replica_list_items": "master_batch_get_replica_list_items_total",
    "get_replica_list_requests": "master_get_replica_list_requests_total",
    # A counter named without _total: Prometheus' parser reads its sample as ..._total.
    "evicted_keys": "master_evicted_key_count_total",
}


def parse_mooncake_metrics(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The master's gauges and counters (docs/adapters.md, "mooncake-metrics"); None when
    absent."""
    with reading(source):
        samples = read_samples(decode(text))
        if MARKER not in samples:
            raise FormatProblem(f"no {MARKER} series: not the Mooncake master's /metrics")
        gauges = {name: series_total(samples.get(sample)) for name, sample in GAUGES.items()}
        counters = {name: series_total(samples.get(sample)) for name, sample in COUNTERS.items()}
        return {
            "tool": "mooncake-metrics",
            "tool_version": None,
            "gauges": gauges,
            "counters": counters,
        }


def store_facts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the master's counters say about one bench (a side service's facts in a cell's
    server facts): the store's keys and bytes after it, and the items put, looked up and
    fetched during it (None where absent or a counter went down). No lookup hit rate: the
    master's items are keys, not the prompt tokens a hit rate is judged by."""
    deltas = {
        name: _delta(before["counters"].get(name), after["counters"].get(name)) for name in COUNTERS
    }
    return {
        "metrics_tool": "mooncake-metrics",
        "lookup_hit_rate": None,
        "key_count": after["gauges"].get("key_count"),
        "allocated_bytes": after["gauges"].get("allocated_bytes"),
        **deltas,
    }


def _delta(old: float | None, new: float | None) -> float | None:
    if old is None or new is None or new < old:
        return None
    return float(new - old)
