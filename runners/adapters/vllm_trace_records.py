"""Reads `vllm bench serve --dataset-name timed_trace --save-detailed`'s result JSON into the
per-request records a trace replay keeps (the rows of docs/adapters.md "replay-records"), so a
`vllm`-profile replay is summarised and checked for fidelity as simhost's is. Pure: no I/O.

What vLLM 0.32 saves per request, in the trace file's row order (serve.py, `result`): lists
`input_lens`, `output_lens`, `ttfts`, `itls`, `latencies`, `start_times`, `errors` (seconds,
and `time.perf_counter()` readings for the start times). It saves no success flag (an error
string is empty on success) and no benchmark start: the timed trace's first row is at 0 and sent
at once, so that request's start is the replay's start.
"""

from __future__ import annotations

import json
from typing import Any

from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, reading

PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors")


def parse_vllm_trace_records(text: str | bytes, *, source: str = "<input>") -> list[dict[str, Any]]:
    """One record per request the trace file listed, by its position in the file."""
    with reading(source):
        try:
            result = json.loads(decode(text))
        except json.JSONDecodeError as error:
            raise FormatProblem(f"not JSON: {error.msg} at line {error.lineno}") from None
        columns = _columns(result)
        starts = columns["start_times"]
        return [_record(index, columns, start - starts[0]) for index, start in enumerate(starts)]


def _columns(result: Any) -> dict[str, list[Any]]:
    if not isinstance(result, dict):
        raise FormatProblem("the result is not a JSON object")
    missing = [key for key in PER_REQUEST if not isinstance(result.get(key), list)]
    if missing:
        raise FormatProblem(
            f"no per-request {', '.join(missing)}: the result was not saved with --save-detailed"
        )
    lengths = {key: len(result[key]) for key in PER_REQUEST}
    if len(set(lengths.values())) != 1:
        raise FormatProblem(f"the per-request lists differ in length: {lengths}")
    if not result["start_times"]:
        raise FormatProblem("the result holds no requests")
    return {key: result[key] for key in PER_REQUEST}


def _record(index: int, columns: dict[str, list[Any]], sent_s: float) -> dict[str, Any]:
    ok = not columns["errors"][index]
    itls = columns["itls"][index]
    if not isinstance(itls, list):
        raise FormatProblem(f"itls[{index}] is not a list")
    return {
        "index": index,
        "sent_s": _number(sent_s, "start_times", index),
        "ok": ok,
        # The timed trace sends token ids, so the client's count is what the server received.
        "prompt_tokens": _count(columns["input_lens"][index], "input_lens", index),
        "output_tokens": _count(columns["output_lens"][index], "output_lens", index),
        "ttft_ms": _ms(columns["ttfts"][index], "ttfts", index) if ok else None,
        "e2el_ms": _ms(columns["latencies"][index], "latencies", index) if ok else None,
        "itl_ms": [_ms(gap, "itls", index) for gap in itls] if ok else [],
    }


def _number(value: Any, key: str, index: int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatProblem(f"{key}[{index}] is not a number: {value!r}")
    return float(value)


def _ms(value: Any, key: str, index: int) -> float:
    return _number(value, key, index) * 1000.0


def _count(value: Any, key: str, index: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FormatProblem(f"{key}[{index}] is not a token count: {value!r}")
    return value


def records_lines(records: list[dict[str, Any]]) -> bytes:
    """The records as the replay-records file simhost's client writes: one JSON line each."""
    return b"".join(
        json.dumps(record, separators=(",", ":")).encode() + b"\n" for record in records
    )
