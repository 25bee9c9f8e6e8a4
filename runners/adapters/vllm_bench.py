"""Reads `vllm bench serve --save-result` output: one JSON run, JSON lines, sweep files.

Aggregates are milliseconds in the source; per-request arrays are seconds and become ms here.
Pure: no I/O, no Django.
"""

from __future__ import annotations

import math
import re
from typing import Any

from runners.adapters.documents import decode, load_json_records
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.fields import Record, finite, whole
from runners.adapters.runs import LATENCY_GROUPS, build_run

LATENCY_METRICS = (
    "ttft",
    "tpot",
    "itl",
    "e2el",
    "client_queue_time",
    "e2el_including_client_queue",
)
AGGREGATE_KEY = re.compile(
    r"^(mean|median|std|p\d+(?:\.\d+)?)_(" + "|".join(LATENCY_METRICS) + r")_ms$"
)
# Per-request arrays (seconds) and the normalized name of each (milliseconds).
PER_REQUEST_SECONDS = {
    "ttfts": "ttft_ms",
    "latencies": "e2el_ms",
    "queue_times": "client_queue_ms",
    "server_ttfts": "server_ttft_ms",
    "server_queue_times": "server_queue_ms",
}
PER_REQUEST_COUNTS = {"input_lens": "input_tokens", "output_lens": "output_tokens"}
# Arrays whose entries are meaningless for a failed request (reported as None there).
FAILED_ENTRIES = ("ttft_ms", "e2el_ms", "itl_ms")
# vLLM's own text-valued keys; any other top-level text came from `--metadata KEY=VALUE`
# (written between `num_prompts` and `request_rate`, values always strings).
TOOL_TEXT_KEYS = frozenset(
    {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id"}
    | {"request_rate", "ramp_up_strategy"}
)
THROUGHPUTS = (
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
)


def parse_vllm_bench(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Every run in the file, normalized (see docs/adapters.md, "vllm-bench")."""
    with reading(source):
        records = _run_records(load_json_records(decode(text)))
        return {
            "tool": "vllm-bench",
            "tool_version": None,
            "runs": [_read_placed_run(place, data) for place, data in records],
        }


def read_run(record: Record) -> dict[str, Any]:
    """One `--save-result` payload as a normalized run."""
    _require_outcome(record)
    completed = record.count("completed", required=True)
    rate, unlimited = _request_rate(record)
    values: dict[str, Any] = {
        "label": record.text("label"),
        "max_concurrency": record.count("max_concurrency"),
        "request_rate": rate,
        "request_rate_unlimited": unlimited,
        "num_prompts": record.count("num_prompts"),
        "completed": completed,
        "failed": _failed(record, completed),
        "duration_s": record.number("duration", required=True),
        "total_input_tokens": record.count("total_input_tokens"),
        "total_output_tokens": record.count("total_output_tokens"),
        **{key: record.number(key) for key in THROUGHPUTS},
        "max_concurrent_requests": record.count("max_concurrent_requests"),
        **_latency_summaries(record),
        "model_id": record.text("model_id"),
        "backend": record.text("backend"),
        "date": record.text("date"),
        "run_number": record.count("run_number"),
        "per_request": _per_request(record),
    }
    metadata = _metadata(record)
    if metadata:
        values["metadata"] = metadata
    return build_run(values)


def _metadata(record: Record) -> dict[str, str]:
    """The `--metadata` keys (arm, tier, ...), as vLLM wrote them: text."""
    return {
        key: value
        for key, value in record.data.items()
        if isinstance(value, str) and key not in TOOL_TEXT_KEYS
    }


def _read_placed_run(place: str, data: Any) -> dict[str, Any]:
    """read_run, with the line or list item the run came from in front of any problem."""
    try:
        return read_run(Record(data))
    except FormatProblem as problem:
        if not place:
            raise
        raise FormatProblem(f"{place}: {problem}") from None


def _run_records(records: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    # A sweep summary.json is one list of run payloads; anything else is one run per document.
    if len(records) == 1 and isinstance(records[0][1], list):
        runs = records[0][1]
        if not runs:
            raise FormatProblem("the list holds no runs")
        return [(f"item {index}", run) for index, run in enumerate(runs)]
    return records


def _require_outcome(record: Record) -> None:
    missing = [key for key in ("duration", "completed") if not record.has(key)]
    if len(missing) == 2:
        raise FormatProblem(
            "no `duration` and no `completed`: a post-processed or old pipeline file "
            "holding only latency aggregates cannot show how many requests completed; "
            "use the file `vllm bench serve --save-result` wrote"
        )
    if missing:
        raise FormatProblem(f"{record.where(missing[0])} is missing")


def _request_rate(record: Record) -> tuple[float | None, bool | None]:
    """(rate, unlimited): vLLM writes the string "inf" for an unlimited rate."""
    value = record.data.get("request_rate")
    if value is None:
        return None, None
    if value == "inf" or (isinstance(value, float) and value == math.inf):
        return None, True
    return finite(value, record.where("request_rate")), False


def _failed(record: Record, completed: int) -> int | None:
    failed = record.count("failed")
    if failed is not None:
        return failed
    # `failed` arrived in 0.12 and pooling runs never write it: prompts - completed is exact there.
    prompts = record.count("num_prompts")
    if prompts is None or prompts < completed:
        return None
    return prompts - completed


def _latency_summaries(record: Record) -> dict[str, dict[str, float] | None]:
    groups: dict[str, dict[str, float | None]] = {}
    for key in record.data:
        match = AGGREGATE_KEY.match(key)
        if match:
            stat, metric = match.groups()
            groups.setdefault(f"{metric}_ms", {})[stat] = record.number(key)
    summaries: dict[str, dict[str, float] | None] = dict.fromkeys(LATENCY_GROUPS)
    for group, stats in groups.items():
        present = {stat: value for stat, value in stats.items() if value is not None}
        summaries[group] = present or None
    return summaries


def _per_request(record: Record) -> dict[str, Any] | None:
    """The per-request arrays in ms, failed requests as None; None when the file has none."""
    arrays: dict[str, list[Any]] = {}
    for key, name in PER_REQUEST_SECONDS.items():
        values = record.items(key)
        if values is not None:
            # server_ttfts may hold null for requests the server did not time.
            arrays[name] = _milliseconds(values, record.where(key), nullable=True)
    itls = record.items("itls")
    if itls is not None:
        where = record.where("itls")
        arrays["itl_ms"] = [_gaps_ms(gaps, f"{where}[{i}]") for i, gaps in enumerate(itls)]
    for key, name in PER_REQUEST_COUNTS.items():
        values = record.items(key)
        if values is not None:
            arrays[name] = [whole(v, f"{record.where(key)}[{i}]") for i, v in enumerate(values)]
    errors = _errors(record)
    if not arrays and errors is None:
        return None
    return _mark_failures(arrays, errors)


def _milliseconds(values: list[Any], where: str, *, nullable: bool = False) -> list[Any]:
    """Seconds to ms. A detailed file holds millions of gaps: check in bulk, name the bad one."""
    if all(type(value) is float and math.isfinite(value) for value in values):
        return [value * 1000.0 for value in values]
    return [
        None if value is None and nullable else finite(value, f"{where}[{i}]") * 1000.0
        for i, value in enumerate(values)
    ]


def _gaps_ms(gaps: Any, where: str) -> list[float]:
    if not isinstance(gaps, list):
        raise FormatProblem(f"{where} is not a list of inter-token gaps")
    return _milliseconds(gaps, where)


def _errors(record: Record) -> list[bool] | None:
    """Per request: did it fail? (`errors` holds "" on success, the error text otherwise)."""
    errors = record.items("errors")
    if errors is None:
        return None
    if not all(isinstance(error, str) for error in errors):
        raise FormatProblem(f"{record.where('errors')} must be a list of strings")
    return [bool(error) for error in errors]


def _mark_failures(arrays: dict[str, list[Any]], errors: list[bool] | None) -> dict[str, Any]:
    lengths = {name: len(values) for name, values in arrays.items()}
    if errors is not None:
        lengths["errors"] = len(errors)
    if len(set(lengths.values())) > 1:
        raise FormatProblem(f"per-request arrays differ in length {lengths}")
    size = next(iter(lengths.values()))
    failed = errors or [False] * size
    for name in FAILED_ENTRIES:
        if name in arrays:
            arrays[name] = [
                None if failed[i] or _is_zero(v) else v for i, v in enumerate(arrays[name])
            ]
    return {"count": size, "errors": None if errors is None else sum(errors), **arrays}


def _is_zero(value: Any) -> bool:
    # vLLM leaves ttft and latency at 0.0 for a failed request; no real request takes 0 s.
    return isinstance(value, float) and value == 0.0
