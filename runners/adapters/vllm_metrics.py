"""Reads a vLLM `/metrics` scrape (Prometheus text) into the counters and gauges the gates use.

Parsed by a line reader for the plain lines engines print (one sample a line, quoted label values),
and by prometheus_client's text parser whenever a page has any other line: the same samples
either way, five to ten times faster on a vLLM page (each soak window parses two of them). Pure:
no I/O, no Django. Deltas: vllm_metrics_delta.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from runners.adapters.cache_config import read_cache_config
from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, excerpt, reading

# normalized counter -> sample names to try, newest spelling first (all summed across engines)
COUNTERS = {
    "prefix_cache_queries_tokens": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ),
    "prefix_cache_hits_tokens": (
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
    ),
    "external_prefix_cache_queries_tokens": ("vllm:external_prefix_cache_queries_total",),
    "external_prefix_cache_hits_tokens": ("vllm:external_prefix_cache_hits_total",),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "kv_offload_load_bytes": ("vllm:kv_offload_load_bytes_total", "vllm:kv_offload_load_bytes"),
    "kv_offload_store_bytes": ("vllm:kv_offload_store_bytes_total", "vllm:kv_offload_store_bytes"),
    "kv_offload_load_time_s": ("vllm:kv_offload_load_time_total", "vllm:kv_offload_load_time"),
    "kv_offload_store_time_s": ("vllm:kv_offload_store_time_total", "vllm:kv_offload_store_time"),
}
# 0.16-0.20 name the offload transfers by direction; 0.25+ keep these as deprecated duplicates.
OFFLOAD_BY_DIRECTION = {
    "kv_offload_load_bytes": ("vllm:kv_offload_total_bytes_total", "CPU_to_GPU"),
    "kv_offload_store_bytes": ("vllm:kv_offload_total_bytes_total", "GPU_to_CPU"),
    "kv_offload_load_time_s": ("vllm:kv_offload_total_time_total", "CPU_to_GPU"),
    "kv_offload_store_time_s": ("vllm:kv_offload_total_time_total", "GPU_to_CPU"),
}
# normalized histogram -> base names to try (samples are <base>_count and <base>_sum)
HISTOGRAMS = {
    "ttft_s": ("vllm:time_to_first_token_seconds",),
    "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot_s": ("vllm:request_time_per_output_token_seconds",),
    "e2el_s": ("vllm:e2e_request_latency_seconds",),
    "queue_s": ("vllm:request_queue_time_seconds",),
    "inference_s": ("vllm:request_inference_time_seconds",),
    "prefill_s": ("vllm:request_prefill_time_seconds",),
    "decode_s": ("vllm:request_decode_time_seconds",),
}
# Counts of requests add up across engines; usage fractions are averaged.
SUMMED_GAUGES = {
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
}
AVERAGED_GAUGES = {"kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")}
PROCESS_GAUGES = {
    "process_resident_memory_bytes": "process_resident_memory_bytes",
    "process_start_time_s": "process_start_time_seconds",
}
BY_LABEL = {
    "request_success": ("vllm:request_success_total", "finished_reason"),
    "prompt_tokens_by_source": ("vllm:prompt_tokens_by_source_total", "source"),
    # vLLM >= 0.32: cached prompt tokens by where they were found (device, host, p2p, disk).
    "prompt_tokens_cached_by_source": ("vllm:prompt_tokens_cached_by_source_total", "source"),
    "requests_waiting_by_reason": ("vllm:num_requests_waiting_by_reason", "reason"),
}

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_vllm_metrics(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The scrape, normalized (see docs/adapters.md, "vllm-metrics")."""
    with reading(source):
        samples = read_samples(decode(text))
        if not any(name.startswith("vllm:") for name in samples):
            raise FormatProblem("no vllm: series: not a vLLM /metrics page")
        return {
            "tool": "vllm-metrics",
            "tool_version": None,
            "engines": _label_values(samples, "engine"),
            "model_names": _label_values(samples, "model_name"),
            "counters": _counters(samples),
            **{name: _by_label(samples, *spec) for name, spec in BY_LABEL.items()},
            "histograms": {name: _histogram(samples, bases) for name, bases in HISTOGRAMS.items()},
            "gauges": _gauges(samples),
            "cache_config": read_cache_config(samples.get("vllm:cache_config_info", [])),
        }


def read_samples(text: str) -> Samples:
    """Sample name -> [(labels, value)], without the counters' `_created` timestamps."""
    fast = _plain_samples(text)
    if fast is not None:
        return fast
    try:
        families = list(text_string_to_metric_families(text))
    # The third-party parser signals bad text with ValueError, but other errors are not ruled out.
    except Exception as error:
        raise FormatProblem(f"not Prometheus text ({excerpt(str(error), 80)})") from None
    samples: Samples = defaultdict(list)
    for family in families:
        for sample in family.samples:
            # `_created` holds the counter's creation time (~1.8e9), never a count to add up.
            if not sample.name.endswith("_created"):
                samples[sample.name].append((dict(sample.labels), float(sample.value)))
    return dict(samples)


# A plain sample line: a name, optional labels whose values hold no backslash, a value, an
# optional integer timestamp. Anything else (escapes, odd spacing, a bad value) is left to
# prometheus_client, which reads or refuses the whole page as before.
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
_PLAIN_LINE = re.compile(
    rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{_LABEL}(?:,{_LABEL})*,?)?)\}})? ([^ ]+)(?: -?[0-9]+)?"
)
_PLAIN_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped", "info", "stateset", "unknown"}
_PLAIN_VALUE = re.compile(r"[+-]?(?:[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+\.|Inf|NaN)")


def _plain_samples(text: str) -> Samples | None:
    """The samples of a page made only of comments and plain sample lines; None otherwise."""
    samples: Samples = defaultdict(list)
    for line in text.split("\n"):
        if line.startswith("# TYPE "):
            family, _, kind = line[len("# TYPE ") :].partition(" ")
            if kind not in _TYPES:
                return None  # prometheus_client refuses it, naming the reason
            if kind == "counter" and not family.endswith("_total"):
                # prometheus_client renames such a counter's samples to `<name>_total` (the
                # Mooncake master declares `master_evicted_key_count counter`): its reading.
                return None
        if not line or line.startswith("#"):
            continue
        match = _PLAIN_LINE.fullmatch(line)
        if match is None or not _PLAIN_VALUE.fullmatch(match[3]):
            return None
        name, labels = match[1], match[2]
        if not name.endswith("_created"):
            pairs = dict(_label_pairs(labels)) if labels else {}
            samples[name].append((pairs, float(match[3])))
    return dict(samples) if samples else None


@functools.lru_cache(maxsize=4096)
def _label_pairs(labels: str) -> tuple[tuple[str, str], ...]:
    """A plain line's labels as (name, value) pairs. Cached: a server's pages repeat the same
    label sets scrape after scrape (only the values change), and reading them again was about
    40 % of reading a page. Each caller gets a dict of its own (the pairs are immutable)."""
    return tuple(_PLAIN_LABEL.findall(labels))


def _label_values(samples: Samples, label: str) -> list[str]:
    values = {
        labels[label]
        for name, series in samples.items()
        if name.startswith("vllm:")
        for labels, _ in series
        if label in labels
    }
    return sorted(values, key=lambda value: (len(value), value))


def _first(samples: Samples, names: tuple[str, ...]) -> list[tuple[dict[str, str], float]] | None:
    for name in names:
        if name in samples:
            return samples[name]
    return None


def series_total(series: list[tuple[dict[str, str], float]] | None) -> float | None:
    """A Prometheus series summed over its labels (engines, models, ranks); None when absent
    or when any value is NaN or infinite."""
    if not series:
        return None
    total = math.fsum(value for _, value in series)
    return total if math.isfinite(total) else None


def _counters(samples: Samples) -> dict[str, float | None]:
    counters = {name: series_total(_first(samples, names)) for name, names in COUNTERS.items()}
    for name, (sample, direction) in OFFLOAD_BY_DIRECTION.items():
        if counters[name] is None:
            series = samples.get(sample, [])
            counters[name] = series_total(
                [s for s in series if s[0].get("transfer_type") == direction]
            )
    return counters


def _by_label(samples: Samples, name: str, label: str) -> dict[str, float | None] | None:
    if name not in samples:
        return None
    groups: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for labels, value in samples[name]:
        groups[labels.get(label, "")].append((labels, value))
    return {key: series_total(series) for key, series in sorted(groups.items())}


def _histogram(samples: Samples, bases: tuple[str, ...]) -> dict[str, float | None] | None:
    for base in bases:
        if f"{base}_count" in samples:
            return {
                "count": series_total(samples[f"{base}_count"]),
                "sum": series_total(samples.get(f"{base}_sum")),
            }
    return None


def _gauges(samples: Samples) -> dict[str, float | None]:
    gauges = {name: series_total(_first(samples, names)) for name, names in SUMMED_GAUGES.items()}
    for name, names in AVERAGED_GAUGES.items():
        series = _first(samples, names)
        total = series_total(series)
        gauges[name] = None if total is None or not series else total / len(series)
    for name, sample in PROCESS_GAUGES.items():
        # One process answers a scrape; its own process_* series are not per engine.
        series = samples.get(sample)
        gauges[name] = series_total(series[:1]) if series else None
    return gauges
