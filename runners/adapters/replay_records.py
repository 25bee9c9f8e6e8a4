"""Reads a trace replay's per-request records (`python -m simhost.bench.replay --records`, one
JSON line per request) into the normalized run every bench cell has, so the G3 clauses read a
replay exactly as they read `vllm bench serve` (docs/adapters.md, "replay-records").

Only measured requests count (the replay's warm-up window fills the caches, unmeasured);
latencies are summarised over the completed ones, throughputs over the measured window (first
measured send to last measured finish). Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from runners.adapters.documents import decode, load_json_records
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.fields import Record
from runners.adapters.runs import build_run

# Nearest rank, as the trace characterisation and the fidelity check read percentiles.
STATS = {"mean": None, "median": 50, "p90": 90, "p99": 99}


def parse_replay_records(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The records as one normalized run (the file is one replay at one tier)."""
    with reading(source):
        rows = [_row(place, data) for place, data in load_json_records(decode(text))]
        if not rows:
            raise FormatProblem("the file holds no request records")
        return {"tool": "replay-records", "tool_version": None, "runs": [summarize(rows)]}


def _row(place: str, data: Any) -> dict[str, Any]:
    record = Record(data, place)
    row = {
        "index": record.count("index", required=True),
        "sent_s": record.number("sent_s", required=True),
        "send_at_s": record.number("send_at_s"),
        "ok": data.get("ok") is True,
        "measured": data.get("measured", True) is not False,
        "prompt_tokens": record.count("prompt_tokens"),
        "output_tokens": record.count("output_tokens"),
        "ttft_ms": record.number("ttft_ms"),
        "e2el_ms": record.number("e2el_ms"),
        "itl_ms": data.get("itl_ms") or [],
    }
    if not isinstance(row["itl_ms"], list):
        raise FormatProblem(f"{record.where('itl_ms')} is not a list")
    return row


def summarize(rows: list[dict[str, Any]], max_concurrency: int | None = None) -> dict[str, Any]:
    """The measured requests as a normalized run (RUN_KEYS, then the replay's own keys)."""
    measured = [row for row in rows if row["measured"]]
    done = [row for row in measured if row["ok"] and row["e2el_ms"] is not None]
    start = min((row["sent_s"] for row in measured), default=0.0)
    end = max((row["sent_s"] + row["e2el_ms"] / 1000.0 for row in done), default=start)
    duration = end - start
    output = sum(row["output_tokens"] or 0 for row in done)
    prompt = sum(row["prompt_tokens"] or 0 for row in done)
    per_second = (lambda amount: amount / duration) if duration > 0 else (lambda amount: None)
    tpots = [
        (row["e2el_ms"] - row["ttft_ms"]) / (row["output_tokens"] - 1)
        for row in done
        if row["ttft_ms"] is not None and (row["output_tokens"] or 0) > 1
    ]
    return build_run(
        {
            "max_concurrency": max_concurrency,
            "request_rate_unlimited": False,
            "num_prompts": len(measured),
            "completed": len(done),
            "failed": len(measured) - len(done),
            "duration_s": duration,
            "total_input_tokens": prompt,
            "total_output_tokens": output,
            "request_throughput": per_second(len(done)),
            "output_throughput": per_second(output),
            "total_token_throughput": per_second(prompt + output),
            "ttft_ms": _stats([row["ttft_ms"] for row in done if row["ttft_ms"] is not None]),
            "tpot_ms": _stats(tpots),
            "itl_ms": _stats([gap for row in done for gap in row["itl_ms"]]),
            "e2el_ms": _stats([row["e2el_ms"] for row in done]),
            "warmup_requests": len(rows) - len(measured),
            "per_request": _per_request(measured),
        }
    )


def _per_request(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The measured requests in send order (the G3 step check reads TTFT by it), failed as None;
    `send_at_s` too when the records say when each was scheduled."""
    ordered = sorted(measured, key=lambda row: (row["sent_s"], row["index"]))
    ok = [row["ok"] and row["e2el_ms"] is not None for row in ordered]
    requests: dict[str, Any] = {
        "count": len(ordered),
        "errors": ok.count(False),
        "sent_s": [row["sent_s"] for row in ordered],
        "ttft_ms": [
            row["ttft_ms"] if good else None for row, good in zip(ordered, ok, strict=True)
        ],
        "e2el_ms": [
            row["e2el_ms"] if good else None for row, good in zip(ordered, ok, strict=True)
        ],
        # A goodput clause's TPOT bound reads them (vLLM's TPOT: the tokens after the first).
        "output_tokens": [
            row["output_tokens"] if good else None for row, good in zip(ordered, ok, strict=True)
        ],
    }
    if any(row.get("send_at_s") is not None for row in ordered):
        # When each was scheduled to leave: the run page plots the arrival-time error.
        requests["send_at_s"] = [row.get("send_at_s") for row in ordered]
    return requests


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    return {
        name: float(array.mean())
        if rank is None
        else float(np.percentile(array, rank, method="inverted_cdf"))
        for name, rank in STATS.items()
    }
