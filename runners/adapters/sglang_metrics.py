"""Reads an SGLang `/metrics` scrape (`--enable-metrics`) into the normalized shape of
vllm-metrics (docs/adapters.md), so the delta, the hit rates and the arm check read every
engine alike.

SGLang counts cached prompt tokens by where they were found: `sglang:cached_tokens_total
{cache_source="device"|"host"|"storage"...}` over `sglang:prompt_tokens_total`. A host or storage
hit is the offload tier's; the tokens the tier was asked for are the prompt tokens the GPU's
radix cache did not hold. Pure: no I/O, no Django.
"""

from __future__ import annotations

import math
from typing import Any

from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.vllm_metrics import Samples, read_samples, series_total

PREFIX = "sglang:"
# cache_source values that are GPU memory; every other source is an offload tier (HiCache's
# host DRAM, its storage backend: file, mooncake, hf3fs, nixl ...).
DEVICE_SOURCES = ("device",)
SUMMED_COUNTERS = {
    "prompt_tokens": "sglang:prompt_tokens_total",
    "generation_tokens": "sglang:generation_tokens_total",
    "preemptions": "sglang:num_retracted_requests_total",
    "kv_offload_store_tokens": "sglang:backuped_tokens_total",
    "storage_prefetched_tokens": "sglang:prefetched_tokens_total",
    "evicted_tokens": "sglang:evicted_tokens_total",
    "aborted_requests": "sglang:num_aborted_requests_total",
}
# Every TP rank reports the same logical count of these (SGLang's own help text): one rank's.
PER_RANK_COUNTERS = {
    "kv_offload_load_tokens": "sglang:load_back_tokens_total",
    "kv_offload_load_bytes": "sglang:load_back_bytes_total",
}
HISTOGRAMS = {
    "ttft_s": "sglang:time_to_first_token_seconds",
    "itl_s": "sglang:inter_token_latency_seconds",
    "tpot_s": "sglang:request_time_per_output_token_seconds",
    "e2el_s": "sglang:e2e_request_latency_seconds",
    "queue_s": "sglang:queue_time_seconds",
}
GAUGES = {
    "requests_running": "sglang:num_running_reqs",
    "requests_waiting": "sglang:num_queue_reqs",
    "kv_cache_usage": "sglang:token_usage",
}


def parse_sglang_metrics(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The scrape, normalized (see docs/adapters.md, "sglang-metrics")."""
    with reading(source):
        samples = read_samples(decode(text))
        if not any(name.startswith(PREFIX) for name in samples):
            raise FormatProblem("no sglang: series: not an SGLang /metrics page")
        cached = _by_source(samples)
        return {
            "tool": "sglang-metrics",
            "tool_version": None,
            "engines": _label_values(samples, "tp_rank"),
            "model_names": _label_values(samples, "model_name"),
            "counters": _counters(samples, cached),
            "request_success": None,
            "prompt_tokens_by_source": None,
            "prompt_tokens_cached_by_source": cached,
            "requests_waiting_by_reason": None,
            "histograms": {name: _histogram(samples, base) for name, base in HISTOGRAMS.items()},
            "gauges": _gauges(samples),
            "cache_config": _cache_config(samples),
        }


def _counters(samples: Samples, cached: dict[str, float | None] | None) -> dict[str, Any]:
    counters = {name: series_total(samples.get(sample)) for name, sample in SUMMED_COUNTERS.items()}
    counters |= {name: _one_rank(samples.get(sample)) for name, sample in PER_RANK_COUNTERS.items()}
    prompt = counters["prompt_tokens"]
    device = _sum_of(cached, DEVICE_SOURCES, include=True)
    tier = _sum_of(cached, DEVICE_SOURCES, include=False)
    all_hits = None if device is None or tier is None else device + tier
    # A labelled counter appears only after its first use: a scrape with prompt tokens and no
    # cached_tokens series at all has cached nothing yet (0), not an unknown.
    if cached is None and prompt is not None:
        device = tier = all_hits = 0.0
    return {
        **counters,
        "prefix_cache_queries_tokens": prompt,
        "prefix_cache_hits_tokens": all_hits,
        "external_prefix_cache_queries_tokens": (
            None if prompt is None or device is None else max(prompt - device, 0.0)
        ),
        "external_prefix_cache_hits_tokens": tier,
        "kv_offload_store_bytes": None,
        "kv_offload_load_time_s": _histogram_sum(samples, "sglang:load_back_duration_seconds"),
        "kv_offload_store_time_s": None,
    }


def _by_source(samples: Samples) -> dict[str, float | None] | None:
    series = samples.get("sglang:cached_tokens_total")
    if not series:
        return None
    groups: dict[str, list[tuple[dict[str, str], float]]] = {}
    for labels, value in series:
        groups.setdefault(labels.get("cache_source", ""), []).append((labels, value))
    return {key: series_total(group) for key, group in sorted(groups.items())}


def _sum_of(
    cached: dict[str, float | None] | None, sources: tuple[str, ...], *, include: bool
) -> float | None:
    if cached is None:
        return None
    values = [value for key, value in cached.items() if (key in sources) == include]
    if any(value is None for value in values):
        return None
    return math.fsum(value for value in values if value is not None)


def _cache_config(samples: Samples) -> dict[str, Any] | None:
    """What the scrape says of the cache: its GPU size, and whether a host tier exists (the
    hicache gauges are registered only with --enable-hierarchical-cache). Whether the radix
    cache is on is not exported: None, which the arm check reports as not fully known."""
    tokens = _one_rank(samples.get("sglang:max_total_num_tokens"))
    host = _one_rank(samples.get("sglang:hicache_host_total_tokens"))
    page = _one_rank(samples.get("sglang:page_size"))
    if tokens is None and host is None:
        return None
    return {
        "kv_cache_size_tokens": int(tokens) if tokens is not None else None,
        "block_size": int(page) if page is not None else None,
        "enable_prefix_caching": None,
        "offload_enabled": bool(host),
        "host_cache_size_tokens": int(host) if host is not None else None,
    }


def _gauges(samples: Samples) -> dict[str, float | None]:
    gauges = {name: series_total(samples.get(sample)) for name, sample in GAUGES.items()}
    usage = samples.get("sglang:token_usage")
    gauges["kv_cache_usage"] = (
        None
        if not usage or gauges["kv_cache_usage"] is None
        else gauges["kv_cache_usage"] / len(usage)
    )
    start = samples.get("process_start_time_seconds")
    gauges["process_start_time_s"] = series_total(start[:1]) if start else None
    resident = samples.get("process_resident_memory_bytes")
    gauges["process_resident_memory_bytes"] = series_total(resident[:1]) if resident else None
    return gauges


def _histogram(samples: Samples, base: str) -> dict[str, float | None] | None:
    if f"{base}_count" not in samples:
        return None
    return {
        "count": series_total(samples[f"{base}_count"]),
        "sum": series_total(samples.get(f"{base}_sum")),
    }


def _histogram_sum(samples: Samples, base: str) -> float | None:
    return _one_rank(samples.get(f"{base}_sum"))


def _label_values(samples: Samples, label: str) -> list[str]:
    values = {
        labels[label]
        for name, series in samples.items()
        if name.startswith(PREFIX)
        for labels, _ in series
        if label in labels
    }
    return sorted(values, key=lambda value: (len(value), value))


def _one_rank(series: list[tuple[dict[str, str], float]] | None) -> float | None:
    """The lowest TP rank's series (summed over its other labels, such as the host pool)."""
    if not series:
        return None
    ranks = sorted({labels.get("tp_rank", "") for labels, _ in series}, key=_rank_order)
    return series_total(
        [(labels, v) for labels, v in series if labels.get("tp_rank", "") == ranks[0]]
    )


def _rank_order(rank: str) -> tuple[int, str]:
    return (int(rank), rank) if rank.isdigit() else (1 << 30, rank)
