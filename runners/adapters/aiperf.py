"""Reads AIPerf 0.13 exports: the summary `profile_export_aiperf.json` (`P.json` under
`--profile-export-prefix P`) as the normalized run of vllm-bench (runners/adapters/runs.py), and
the per-request records `profile_export.jsonl` (`P.jsonl`).

Every AIPerf metric names its own unit (`{"unit": "ms", "avg": ..., "p50": ...}`); values are
scaled by that unit, and a unit not listed here is refused, never assumed. Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.documents import decode, load_json, load_json_records
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.fields import Record, finite
from runners.adapters.runs import build_run

SCHEMA_MAJOR = "1"  # schema_version "1.4" in 0.13.0
# A unit of time -> its factor to milliseconds (durations: to seconds, divided by 1000).
TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0}
# normalized latency group -> AIPerf metric. AIPerf's inter_token_latency is each request's
# (latency - TTFT) / (tokens - 1), vLLM's TPOT; its inter_chunk_latency is every gap between
# streamed chunks, vLLM's ITL.
LATENCIES = {
    "ttft_ms": "time_to_first_token",
    "tpot_ms": "inter_token_latency",
    "itl_ms": "inter_chunk_latency",
    "e2el_ms": "request_latency",
}
# AIPerf statistic -> normalized name; p50 is the median and is reported as such.
STATISTICS = {
    "avg": "mean",
    "p50": "median",
    "std": "std",
    **{f"p{n}": f"p{n}" for n in (1, 5, 10, 25, 75, 90, 95, 99)},
}
RATES = {
    "request_throughput": ("request_throughput", "requests/sec"),
    "output_throughput": ("output_token_throughput", "tokens/sec"),
    "total_token_throughput": ("total_token_throughput", "tokens/sec"),
}
RATE_PHASES = ("poisson", "gamma", "constant")
# normalized per-request column -> (AIPerf record metric, "time" (to ms) or "tokens")
RECORD_COLUMNS = {
    "ttft_ms": ("time_to_first_token", "time"),
    "tpot_ms": ("inter_token_latency", "time"),
    "e2el_ms": ("request_latency", "time"),
    "input_tokens": ("input_sequence_length", "tokens"),
    "output_tokens": ("output_sequence_length", "tokens"),
}
# Keys only an AIPerf summary carries, for content detection.
SUMMARY_KEYS = ("aiperf_version", "benchmark_duration")


def parse_aiperf(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The summary as one normalized run (see docs/adapters.md, "aiperf")."""
    with reading(source):
        summary = Record(load_json(decode(text)))
        _require_aiperf(summary)
        return {
            "tool": "aiperf",
            "tool_version": summary.text("aiperf_version"),
            "schema": summary.text("schema_version"),
            "runs": [read_summary(summary)],
        }


def is_aiperf_summary(document: Any) -> bool:
    return isinstance(document, dict) and all(key in document for key in SUMMARY_KEYS)


def read_summary(summary: Record) -> dict[str, Any]:
    _require_finished(summary)
    completed, failed = _outcome(summary)
    phase = _profiling_phase(summary)
    kind = phase.text("type") if phase else None
    values = {
        "max_concurrency": phase.count("concurrency") if phase else None,
        "request_rate": phase.number("rate") if phase and kind in RATE_PHASES else None,
        "request_rate_unlimited": _unlimited(kind),
        "num_prompts": phase.count("requests") if phase else None,
        "completed": completed,
        "failed": failed,
        "duration_s": _seconds(summary, "benchmark_duration"),
        "total_input_tokens": _count(summary, "total_isl", "tokens"),
        "total_output_tokens": _count(summary, "total_osl", "tokens"),
        **{key: _rate(summary, name, unit) for key, (name, unit) in RATES.items()},
        **{key: _latency(summary, name) for key, name in LATENCIES.items()},
        "model_id": _model(summary),
        "date": summary.text("start_time"),
        "phase_type": kind,
        "error_summary": _error_summary(summary),
    }
    return build_run(values)


def _require_aiperf(summary: Record) -> None:
    if not summary.has("aiperf_version") and not summary.has("schema_version"):
        raise FormatProblem(
            "no `aiperf_version` and no `schema_version`: not an AIPerf summary "
            "(the profile_export_aiperf.json `aiperf profile` writes)"
        )
    version = summary.text("schema_version", required=True)
    if version.split(".")[0] != SCHEMA_MAJOR:
        raise FormatProblem(
            f"schema_version is {version!r}; this adapter reads AIPerf schema {SCHEMA_MAJOR}.x"
        )


def _require_finished(summary: Record) -> None:
    # A cancelled benchmark (Ctrl-C, a failed-request threshold) summarizes part of a run.
    if summary.data.get("was_cancelled") is True or summary.data.get("is_complete") is False:
        raise FormatProblem(
            "was_cancelled is true or is_complete is false: the benchmark stopped early, "
            "and its summary covers part of the run"
        )


def _outcome(summary: Record) -> tuple[int, int | None]:
    """(successful, failed). AIPerf's request_count counts successes only; its
    completed_request_count is successes plus errors, and error_request_count is absent when
    no request failed."""
    attempted = _count(summary, "completed_request_count", "requests")
    errors = _count(summary, "error_request_count", "requests")
    successes = _count(summary, "request_count", "requests")
    if successes is None:
        if attempted is None or errors is None:
            raise FormatProblem("request_count is missing (how many requests succeeded)")
        successes = attempted - errors
    if errors is None and attempted is not None:
        errors = attempted - successes
    if errors is not None and errors < 0:
        raise FormatProblem("completed_request_count is below request_count")
    return successes, errors


def _metric(summary: Record, name: str) -> tuple[Record, str] | None:
    """The metric object at `name` and its unit; None when AIPerf did not report it."""
    metric = summary.child(name)
    if metric is None:
        return None
    return metric, metric.text("unit", required=True)


def _unit_problem(metric: Record, unit: str, allowed: str) -> FormatProblem:
    return FormatProblem(f"{metric.where('unit')} is {unit!r}, expected {allowed}")


def _count(summary: Record, name: str, want: str) -> int | None:
    found = _metric(summary, name)
    if found is None:
        return None
    metric, unit = found
    if unit != want:
        raise _unit_problem(metric, unit, want)
    return metric.count("avg", required=True)


def _seconds(summary: Record, name: str) -> float:
    found = _metric(summary, name)
    if found is None:
        raise FormatProblem(f"{name} is missing")
    metric, unit = found
    if unit not in TIME_UNITS:
        raise _unit_problem(metric, unit, "a unit of time (" + ", ".join(TIME_UNITS) + ")")
    return metric.number("avg", required=True) * TIME_UNITS[unit] / 1000.0


def _rate(summary: Record, name: str, want: str) -> float | None:
    found = _metric(summary, name)
    if found is None:
        return None
    metric, unit = found
    if unit != want:
        raise _unit_problem(metric, unit, want)
    return metric.number("avg", required=True)


def _latency(summary: Record, name: str) -> dict[str, float] | None:
    """mean, median, std and percentiles of the successful requests, in ms."""
    found = _metric(summary, name)
    if found is None:
        return None
    metric, unit = found
    if unit not in TIME_UNITS:
        raise _unit_problem(metric, unit, "a unit of time (" + ", ".join(TIME_UNITS) + ")")
    factor = TIME_UNITS[unit]
    stats = {
        normalized: finite(value * factor, metric.where(stat))
        for stat, normalized in STATISTICS.items()
        if (value := metric.number(stat)) is not None
    }
    return stats or None


def _profiling_phase(summary: Record) -> Record | None:
    """The measured phase of input_config.phases (a warm-up phase, when asked for, comes first)."""
    config = summary.child("input_config")
    phases = config.items("phases") if config else None
    if config is None or not phases:
        return None
    where = config.where("phases")
    found = [Record(item, f"{where}[{i}]") for i, item in enumerate(phases)]
    profiling = [phase for phase in found if phase.text("kind") == "profiling"]
    if len(profiling) > 1:
        raise FormatProblem(f"{where} holds {len(profiling)} profiling phases; expected one")
    return profiling[0] if profiling else None


def _unlimited(kind: str | None) -> bool | None:
    # A concurrency phase sends the next request as soon as one finishes: no rate limit.
    if kind == "concurrency":
        return True
    return False if kind in RATE_PHASES else None


def _model(summary: Record) -> str | None:
    config = summary.child("input_config")
    models = config.child("models") if config else None
    if models is None:
        return None
    items = models.items("items")
    return Record(items[0], f"{models.where('items')}[0]").text("name") if items else None


def _error_summary(summary: Record) -> list[dict[str, Any]] | None:
    """Each kind of error and how many requests it failed: [{code, type, count}]."""
    entries = summary.items("error_summary")
    if entries is None:
        return None
    out = []
    for index, item in enumerate(entries):
        entry = Record(item, f"error_summary[{index}]")
        details = entry.child("error_details")
        out.append(
            {
                "code": details.count("code") if details else None,
                "type": details.text("type") if details else None,
                "count": entry.count("count", required=True),
            }
        )
    return out


def parse_aiperf_records(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The profiling phase's per-request records (see docs/adapters.md, "aiperf-records")."""
    with reading(source):
        rows = [Record(data, place) for place, data in load_json_records(decode(text))]
        measured = [row for row in rows if _phase(row) == "profiling"]
        columns: dict[str, list[Any]] = {key: [] for key in RECORD_COLUMNS}
        errors = []
        for row in measured:
            metrics = row.child("metrics") or Record({}, row.where("metrics"))
            error = row.child("error")
            errors.append(_error_text(error) if error else None)
            for key, (name, kind) in RECORD_COLUMNS.items():
                columns[key].append(None if error else _record_value(metrics, name, kind))
        return {
            "tool": "aiperf-records",
            "tool_version": None,
            "per_request": {
                "count": len(measured),
                "errors": sum(error is not None for error in errors),
                **columns,
                "error": errors,
            },
        }


def is_aiperf_record(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("metadata"), dict)
        and "benchmark_phase" in document["metadata"]
        and ("metrics" in document or "error" in document)
    )


def _phase(row: Record) -> str:
    metadata = row.child("metadata", required=True)
    return metadata.text("benchmark_phase", required=True)


def _record_value(metrics: Record, name: str, kind: str) -> float | int | None:
    metric = metrics.child(name)
    if metric is None:
        return None
    unit = metric.text("unit", required=True)
    if kind == "tokens":
        if unit != "tokens":
            raise _unit_problem(metric, unit, "tokens")
        return metric.count("value", required=True)
    if unit not in TIME_UNITS:
        raise _unit_problem(metric, unit, "a unit of time (" + ", ".join(TIME_UNITS) + ")")
    return metric.number("value", required=True) * TIME_UNITS[unit]


def _error_text(error: Record) -> str:
    """`<code> <type>`, e.g. `500 Internal Server Error`: the message body is the server's."""
    code = error.count("code")
    kind = error.text("type") or "error"
    return f"{code} {kind}" if code is not None else kind
