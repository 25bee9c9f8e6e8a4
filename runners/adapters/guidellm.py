"""Reads GuideLLM saved reports: legacy `{benchmarks}`, v1 (`args`) and v2 (`config`) layouts.

One normalized run per benchmark. Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.documents import decode, load_json
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.fields import Record, finite
from runners.adapters.runs import build_run

SCHEMAS = {1: "v1", 2: "v2"}
# GuideLLM percentile keys -> normalized names; p50 is the median and is reported as such.
PERCENTILES = {
    "p001": "p0.1",
    "p01": "p1",
    "p05": "p5",
    "p10": "p10",
    "p25": "p25",
    "p75": "p75",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p999": "p99.9",
}
# normalized latency group -> (GuideLLM metric, factor to milliseconds)
LATENCIES = {
    "ttft_ms": ("time_to_first_token_ms", 1.0),
    "tpot_ms": ("time_per_output_token_ms", 1.0),
    "itl_ms": ("inter_token_latency_ms", 1.0),
    "e2el_ms": ("request_latency", 1000.0),  # GuideLLM keeps request latency in seconds
}
RATES = {
    "request_throughput": "requests_per_second",
    "output_throughput": "output_tokens_per_second",
    "total_token_throughput": "tokens_per_second",
}
RATE_STRATEGIES = ("constant", "poisson")
GUIDELLM_WORKER_CAP = 10240  # settings.max_concurrency, "1Ki per worker"


def parse_guidellm(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Every benchmark of the report as a normalized run (see docs/adapters.md, "guidellm")."""
    with reading(source):
        report = Record(load_json(decode(text)), "")
        schema = report_schema(report)
        benchmarks = report.items("benchmarks", required=True)
        if not benchmarks:
            raise FormatProblem("the report holds no benchmarks")
        metadata = report.child("metadata")
        return {
            "tool": "guidellm",
            "tool_version": metadata.text("guidellm_version") if metadata else None,
            "schema": schema,
            "runs": [
                _read_benchmark(Record(benchmark, f"benchmarks[{index}]"), report)
                for index, benchmark in enumerate(benchmarks)
            ],
        }


def report_schema(report: Record) -> str:
    """`legacy` (no metadata), `v1` or `v2` (from `metadata.version`)."""
    metadata = report.child("metadata")
    if metadata is None:
        return "legacy"
    version = metadata.count("version", required=True)
    if version not in SCHEMAS:
        raise FormatProblem(f"unsupported GuideLLM report schema version {version}")
    return SCHEMAS[version]


def _read_benchmark(benchmark: Record, report: Record) -> dict[str, Any]:
    metrics = benchmark.child("metrics", required=True)
    totals = _totals(benchmark, metrics)
    strategy = _strategy(benchmark)
    kind = strategy.text("type_", required=True) if strategy else None
    values = {
        "label": _label(kind, strategy),
        "strategy": kind,
        "max_concurrency": _concurrency(kind, strategy, benchmark),
        "request_rate": strategy.number("rate") if strategy and kind in RATE_STRATEGIES else None,
        "request_rate_unlimited": _unlimited(kind),
        "num_prompts": totals.count("total"),
        "completed": totals.count("successful", required=True),
        "failed": totals.count("errored"),
        "incomplete": totals.count("incomplete"),
        "duration_s": benchmark.number("duration", required=True),
        "total_input_tokens": _token_total(metrics, "prompt_token_count"),
        "total_output_tokens": _token_total(metrics, "output_token_count"),
        **{key: _successful_mean(metrics, name) for key, name in RATES.items()},
        **{key: _summary(metrics, name, factor) for key, (name, factor) in LATENCIES.items()},
        "model_id": _model(benchmark, report),
    }
    return build_run(values)


def _totals(benchmark: Record, metrics: Record) -> Record:
    # v1/v2 keep the counts in metrics.request_totals; the legacy layout one level up.
    totals = metrics.child("request_totals") or benchmark.child("request_totals")
    if totals is None:
        raise FormatProblem(f"{benchmark.path}: no request_totals (successful/errored counts)")
    return totals


def _strategy(benchmark: Record) -> Record | None:
    holder = benchmark.child("config") or benchmark.child("args")
    return holder.child("strategy") if holder else None


def _label(kind: str | None, strategy: Record | None) -> str | None:
    """Strategy and its load level, e.g. `concurrent c=4`, `constant r=1.5`, `synchronous`."""
    if kind is None:
        return None
    concurrency = _concurrency(kind, strategy, None)
    if kind == "concurrent" and concurrency is not None:
        return f"{kind} c={concurrency}"
    rate = strategy.number("rate") if strategy and kind in RATE_STRATEGIES else None
    return f"{kind} r={rate:g}" if rate is not None else kind


def _concurrency(kind: str | None, strategy: Record | None, benchmark: Record | None) -> int | None:
    if strategy is None:
        return None
    if kind in (*RATE_STRATEGIES, "throughput"):
        return _asked_concurrency(strategy, benchmark)
    streams = strategy.count("streams")
    if streams is not None:
        return streams
    limit = strategy.count("max_concurrency")
    if limit is None and kind == "synchronous":
        return 1  # one request at a time by definition
    return limit


def _asked_concurrency(strategy: Record, benchmark: Record | None) -> int | None:
    """The limit asked for with --max-concurrency. GuideLLM writes its own worker cap (10240 in
    0.8) into a rate or throughput strategy run without one: that is no concurrency limit."""
    holder = benchmark.child("config") or benchmark.child("args") if benchmark else None
    profile = holder.child("profile") if holder else None
    if profile is not None and profile.has("max_concurrency"):
        return profile.count("max_concurrency")
    found = strategy.count("max_concurrency")
    return None if found == GUIDELLM_WORKER_CAP else found


def _unlimited(kind: str | None) -> bool | None:
    if kind == "throughput":
        return True
    return False if kind in RATE_STRATEGIES else None


def _successful(metrics: Record, name: str) -> Record | None:
    metric = metrics.child(name)
    return metric.child("successful") if metric else None


def _successful_mean(metrics: Record, name: str) -> float | None:
    stats = _successful(metrics, name)
    return stats.number("mean") if stats else None


def _token_total(metrics: Record, name: str) -> int | None:
    stats = _successful(metrics, name)
    return stats.count("total_sum") if stats else None


def _summary(metrics: Record, name: str, factor: float) -> dict[str, float] | None:
    """mean, median, std and percentiles of the successful requests, scaled to ms."""
    stats = _successful(metrics, name)
    if stats is None:
        return None
    percentiles = stats.child("percentiles")
    median = stats.number("median")
    if median is None and percentiles is not None:
        median = percentiles.number("p50")
    summary = {"mean": stats.number("mean"), "median": median, "std": stats.number("std_dev")}
    if percentiles is not None:
        for key, normalized in PERCENTILES.items():
            summary[normalized] = percentiles.number(key)
    scaled = {
        stat: finite(value * factor, stats.where(stat))
        for stat, value in summary.items()
        if value is not None
    }
    return scaled or None


def _model(benchmark: Record, report: Record) -> str | None:
    config = benchmark.child("config")
    backend = config.child("backend") if config else None
    worker = benchmark.child("worker")
    for holder, key in (
        (backend, "model"),
        (report.child("args"), "model"),
        (report.child("config"), "model"),
        (worker, "backend_model"),
    ):
        model = holder.text(key) if holder else None
        if model:
            return model
    return None
