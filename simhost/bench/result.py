"""The `vllm bench serve --save-result` file and console summary, from per-request outcomes.

Same keys, order and units as vLLM 0.25 (aggregates in ms, per-request arrays in s), so one
adapter reads simhost and real vLLM. Pure: no I/O, standard library only (numpy is not a
simhost dependency, so the percentile is numpy's default "linear" method written out).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

METRIC_TITLES = {
    "ttft": ("Time to First Token", "TTFT"),
    "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
    "itl": ("Inter-token Latency", "ITL"),
    "e2el": ("End-to-end Latency", "E2EL"),
}
DETAILED_KEYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "queue_times",
    "generated_texts",
    "errors",
)


@dataclass
class RequestOutcome:
    """One request as the client saw it (seconds, `time.perf_counter()` based)."""

    prompt_len: int
    start_time: float
    success: bool = False
    generated_text: str = ""
    output_tokens: int = 0
    ttft: float = 0.0
    itl: List[float] = field(default_factory=list)
    latency: float = 0.0
    queue_time: float = 0.0  # waiting for the --max-concurrency cap, before start_time
    error: str = ""
    server_ttft: Optional[float] = None
    server_arrival: Optional[float] = None  # simhost servers only: CLOCK_MONOTONIC seconds
    server_first_sent: Optional[float] = None
    prompt_tokens: Optional[int] = None  # as the server's usage counted them
    # simhost under --clock virtual: (arrival, last token) off the server's virtual clock
    virtual_span: Optional[Tuple[float, float]] = None


def percentile(values: Sequence[float], pct: float) -> float:
    """numpy.percentile(values, pct) with its default linear interpolation; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentile_key(pct: float) -> str:
    """'99' for 99.0 and '99.9' for 99.9, as vLLM names its keys."""
    return str(int(pct)) if int(pct) == pct else str(pct)


def _aggregate(name: str, values: List[float], percentiles: Sequence[float]) -> Dict[str, float]:
    as_ms = [v * 1000.0 for v in values]
    result = {
        "mean_{}_ms".format(name): statistics.fmean(as_ms) if as_ms else 0.0,
        "median_{}_ms".format(name): statistics.median(as_ms) if as_ms else 0.0,
        "std_{}_ms".format(name): statistics.pstdev(as_ms) if as_ms else 0.0,
    }
    for pct in percentiles:
        result["p{}_{}_ms".format(percentile_key(pct), name)] = percentile(as_ms, pct)
    return result


def _per_second_peaks(outcomes: Sequence[RequestOutcome]) -> Dict[str, float]:
    """Peak output tokens in any 1-second bucket and peak requests alive in a bucket, as vLLM
    0.25 counts them (buckets, so the request peak can exceed --max-concurrency)."""
    done = [o for o in outcomes if o.success]
    if not done:
        return {"max_output_tokens_per_s": 0.0, "max_concurrent_requests": 0}
    origin = min(o.start_time for o in outcomes)
    span = math.ceil(max(o.start_time + o.latency for o in outcomes) - origin) + 1
    tokens = [0] * span
    alive = [0] * span
    for outcome in done:
        moment = outcome.start_time + outcome.ttft
        tokens[min(span - 1, int(moment - origin))] += 1
        for gap in outcome.itl:
            moment += gap
            tokens[min(span - 1, int(moment - origin))] += 1
        first = int(outcome.start_time - origin)
        last = int(outcome.start_time + outcome.latency - origin)
        for second in range(first, last + 1):
            alive[second] += 1
    return {"max_output_tokens_per_s": float(max(tokens)), "max_concurrent_requests": max(alive)}


def _series(outcomes: Sequence[RequestOutcome]) -> Dict[str, List[float]]:
    series: Dict[str, List[float]] = {"ttft": [], "tpot": [], "itl": [], "e2el": []}
    for outcome in outcomes:
        if not outcome.success:
            continue
        if outcome.output_tokens > 1:
            series["tpot"].append((outcome.latency - outcome.ttft) / (outcome.output_tokens - 1))
        series["itl"].extend(outcome.itl)
        series["ttft"].append(outcome.ttft)
        series["e2el"].append(outcome.latency)
    return series


def build_result(
    metadata: Dict[str, Any],
    outcomes: Sequence[RequestOutcome],
    duration: float,
    percentile_metrics: Sequence[str],
    percentiles: Sequence[float],
    detailed: bool,
) -> Dict[str, Any]:
    """The result dict in vLLM's key order: metadata, run totals, peaks, aggregates."""
    completed = [o for o in outcomes if o.success]
    input_tokens = sum(o.prompt_len for o in completed)
    output_tokens = sum(o.output_tokens for o in completed)
    result: Dict[str, Any] = dict(metadata)
    result.update(
        {
            "duration": duration,
            "completed": len(completed),
            "failed": len(outcomes) - len(completed),
            "total_input_tokens": input_tokens,
            "total_output_tokens": output_tokens,
            "request_throughput": len(completed) / duration if duration else 0.0,
            "request_goodput": None,
            "output_throughput": output_tokens / duration if duration else 0.0,
            "total_token_throughput": (input_tokens + output_tokens) / duration
            if duration
            else 0.0,
        }
    )
    if detailed:
        result.update(_detailed(outcomes))
    result.update(_per_second_peaks(outcomes))
    result["rtfx"] = 0.0
    series = _series(outcomes)
    for name in percentile_metrics:
        result.update(_aggregate(name, series[name], percentiles))
    return result


def _detailed(outcomes: Sequence[RequestOutcome]) -> Dict[str, Any]:
    detail: Dict[str, Any] = {
        "input_lens": [o.prompt_len for o in outcomes],
        "output_lens": [o.output_tokens if o.success else 0 for o in outcomes],
        "ttfts": [o.ttft for o in outcomes],
        "itls": [o.itl for o in outcomes],
        "latencies": [o.latency for o in outcomes],
        "start_times": [o.start_time for o in outcomes],
        "queue_times": [o.queue_time for o in outcomes],
        "generated_texts": [o.generated_text for o in outcomes],
        "errors": [o.error for o in outcomes],
    }
    if any(o.server_ttft is not None for o in outcomes):
        detail["server_ttfts"] = [o.server_ttft for o in outcomes]
    return detail


def _line(label: str, value: Any) -> str:
    if isinstance(value, float):
        value = "{:.2f}".format(value)
    return "{:<40} {:<10}".format(label, value)


def render_summary(result: Dict[str, Any], percentile_metrics: Sequence[str]) -> str:
    """The console block vLLM prints after a run."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    lines.append(_line("Successful requests:", result["completed"]))
    lines.append(_line("Failed requests:", result["failed"]))
    if result.get("max_concurrency") is not None:
        lines.append(_line("Maximum request concurrency:", result["max_concurrency"]))
    lines.append(_line("Benchmark duration (s):", result["duration"]))
    lines.append(_line("Total input tokens:", result["total_input_tokens"]))
    lines.append(_line("Total generated tokens:", result["total_output_tokens"]))
    lines.append(_line("Request throughput (req/s):", result["request_throughput"]))
    lines.append(_line("Output token throughput (tok/s):", result["output_throughput"]))
    lines.append(_line("Peak output token throughput (tok/s):", result["max_output_tokens_per_s"]))
    lines.append(_line("Peak concurrent requests:", result["max_concurrent_requests"]))
    lines.append(_line("Total token throughput (tok/s):", result["total_token_throughput"]))
    for name in percentile_metrics:
        title, short = METRIC_TITLES[name]
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        lines.append(_line("Mean {} (ms):".format(short), result["mean_{}_ms".format(name)]))
        lines.append(_line("Median {} (ms):".format(short), result["median_{}_ms".format(name)]))
        for key, value in result.items():
            suffix = "_{}_ms".format(name)
            if key.startswith("p") and key.endswith(suffix):
                pct = key[1 : -len(suffix)]
                lines.append(_line("P{} {} (ms):".format(pct, short), value))
    lines.append("=" * 50)
    return "\n".join(lines)
