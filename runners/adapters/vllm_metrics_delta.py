"""What happened on a server between two /metrics scrapes: counter deltas and hit rates.

Takes two results of one engine metrics adapter (vllm-metrics, sglang-metrics: one shape).
Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.errors import AdapterError, CounterResetError

# finished_reason values that mean the request did not succeed (formats.md §3.1).
FAILURE_REASONS = ("error", "abort")
SOURCE = "metrics_delta"
# The engine metrics adapters whose results share the vllm-metrics shape (docs/adapters.md).
ENGINE_METRICS_TOOLS = ("vllm-metrics", "sglang-metrics")


def metrics_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Counter differences over the interval, hit rates and histogram means (docs/adapters.md).

    A value is None when either scrape lacks it. Raises CounterResetError when the server
    restarted between the scrapes (a counter went down or the process start time changed).
    """
    for name, scrape in (("before", before), ("after", after)):
        if not _is_scrape(scrape):
            raise AdapterError(f"{name} is not an engine metrics result", source=SOURCE)
    if before["tool"] != after["tool"]:
        raise AdapterError(
            f"the scrapes come from different engines ({before['tool']}, {after['tool']})",
            source=SOURCE,
        )
    _refuse_restart(before, after)
    counters = {
        name: _difference(name, before["counters"].get(name), value)
        for name, value in after["counters"].items()
    }
    success = _labelled_difference(before, after, "request_success")
    return {
        "tool": "vllm-metrics-delta",
        "counters": counters,
        "request_success": success,
        "requests_finished": _sum(success.values()) if success is not None else None,
        "requests_failed": _failures(success),
        "prompt_tokens_by_source": _labelled_difference(before, after, "prompt_tokens_by_source"),
        "prompt_tokens_cached_by_source": _labelled_difference(
            before, after, "prompt_tokens_cached_by_source"
        ),
        **_hit_rates(counters),
        "histograms": {
            name: _histogram_difference(name, before["histograms"].get(name), histogram)
            for name, histogram in after["histograms"].items()
        },
    }


def _hit_rates(counters: dict[str, float | None]) -> dict[str, float | None]:
    """Hit rates in tokens over the interval (formats.md §3.1: Δhits / Δqueries)."""
    queries = counters.get("prefix_cache_queries_tokens")
    external_hits = counters.get("external_prefix_cache_hits_tokens")
    return {
        "prefix_cache_hit_rate": _ratio(counters.get("prefix_cache_hits_tokens"), queries),
        # What the offload tier served of what was asked of it: the offload gates' signal.
        "external_prefix_cache_hit_rate": _ratio(
            external_hits, counters.get("external_prefix_cache_queries_tokens")
        ),
        "external_share_of_prompt_tokens": _ratio(external_hits, queries),
    }


def _is_scrape(scrape: Any) -> bool:
    return (
        isinstance(scrape, dict)
        and scrape.get("tool") in ENGINE_METRICS_TOOLS
        and all(isinstance(scrape.get(key), dict) for key in ("counters", "histograms", "gauges"))
    )


def _refuse_restart(before: dict[str, Any], after: dict[str, Any]) -> None:
    started_before = before["gauges"].get("process_start_time_s")
    started_after = after["gauges"].get("process_start_time_s")
    if None not in (started_before, started_after) and started_before != started_after:
        raise CounterResetError(
            f"the server process restarted between the scrapes (started at {started_before:.0f}, "
            f"then at {started_after:.0f}); counters over this interval are meaningless",
            source=SOURCE,
        )


def _difference(name: str, before: float | None, after: float | None) -> float | None:
    if before is None or after is None:
        return None
    if after < before:
        raise CounterResetError(
            f"counter {name} went down from {before:g} to {after:g}: the server restarted "
            "between the scrapes",
            source=SOURCE,
        )
    return after - before


def _labelled_difference(
    before: dict[str, Any], after: dict[str, Any], key: str
) -> dict[str, float | None] | None:
    old, new = before.get(key), after.get(key)
    if old is None or new is None:
        return None
    return {
        label: _difference(f"{key}[{label}]", old.get(label), value) for label, value in new.items()
    }


def _histogram_difference(
    name: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, float | None] | None:
    if before is None or after is None:
        return None
    count = _difference(f"{name}.count", before.get("count"), after.get("count"))
    total = _difference(f"{name}.sum", before.get("sum"), after.get("sum"))
    return {"count": count, "sum": total, "mean": _ratio(total, count)}


def _failures(success: dict[str, float | None] | None) -> float | None:
    if success is None:
        return None
    return _sum(success.get(reason, 0.0) for reason in FAILURE_REASONS)


def _sum(values: Any) -> float | None:
    values = list(values)
    return None if any(value is None for value in values) else sum(values)


def _ratio(part: float | None, whole: float | None) -> float | None:
    """part / whole; None when either is unknown or nothing was queried (never 0/0 = 0)."""
    if part is None or whole is None or whole <= 0:
        return None
    return part / whole
