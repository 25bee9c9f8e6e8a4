"""Reads Dynamo KVBM's own `/metrics` (the port DYN_KVBM_METRICS_PORT names, served by the vLLM
process its connector runs in) into the tier's hit proof: KVBM's host cache hit rate, the tokens
it matched and the blocks it moved between GPU and host.

Names from the kvbm 1.6.1 wheel (`kvbm_` and its metric names in `_core.abi3.so`); no page of a
running KVBM was captured (docs/hosts.md, "Dynamo KVBM"). Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.vllm_metrics import read_samples, series_total

PREFIX = "kvbm_"
COUNTERS = {
    "matched_tokens": ("kvbm_matched_tokens", "kvbm_matched_tokens_total"),
    "offload_blocks_d2h": ("kvbm_offload_blocks_d2h", "kvbm_offload_blocks_d2h_total"),
    "offload_blocks_h2d": ("kvbm_offload_blocks_h2d", "kvbm_offload_blocks_h2d_total"),
    "onboard_blocks_h2d": ("kvbm_onboard_blocks_h2d", "kvbm_onboard_blocks_h2d_total"),
    "onboard_blocks_d2d": ("kvbm_onboard_blocks_d2d", "kvbm_onboard_blocks_d2d_total"),
}
GAUGES = {
    "host_cache_hit_rate": "kvbm_host_cache_hit_rate",
    "disk_cache_hit_rate": "kvbm_disk_cache_hit_rate",
}


def parse_kvbm_metrics(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """KVBM's counters and hit-rate gauges (docs/adapters.md, "kvbm-metrics"); None when
    absent."""
    with reading(source):
        samples = read_samples(decode(text))
        if not any(name.startswith(PREFIX) for name in samples):
            raise FormatProblem("no kvbm_ series: not Dynamo KVBM's /metrics")
        counters = {
            name: next(
                (series_total(samples[n]) for n in names if n in samples),
                None,
            )
            for name, names in COUNTERS.items()
        }
        gauges = {name: series_total(samples.get(sample)) for name, sample in GAUGES.items()}
        return {
            "tool": "kvbm-metrics",
            "tool_version": None,
            "counters": counters,
            "gauges": gauges,
        }


def kvbm_facts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What KVBM's own page says about one bench: its host cache hit rate as KVBM reports it
    after the bench (its `lookup_hit_rate`, the hit proof; None outside [0, 1]) and the growth
    of the tokens it matched and the blocks it offloaded and onboarded."""
    rate = after["gauges"].get("host_cache_hit_rate")
    deltas = {
        name: _delta(before["counters"].get(name), after["counters"].get(name)) for name in COUNTERS
    }
    return {
        "metrics_tool": "kvbm-metrics",
        "lookup_hit_rate": rate if rate is not None and 0 <= rate <= 1 else None,
        **deltas,
    }


def _delta(old: float | None, new: float | None) -> float | None:
    if old is None or new is None or new < old:
        return None
    return float(new - old)
