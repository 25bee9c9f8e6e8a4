"""Reads `python -m sglang.bench_serving --output-file F [--output-details]` output: JSON lines,
one run appended per invocation, into the normalized runs of vllm-bench (runners/adapters/runs.py).

SGLang spells some keys its own way (`*_e2e_latency_ms`, `total_throughput`), writes no
`num_prompts` or `failed` (with --output-details the `errors` list gives both), and writes an
unlimited request rate as the bare `Infinity` Python's json emits, which JSON does not allow: that
one key is read as vLLM's "inf". Pure: no I/O, no Django.
"""

from __future__ import annotations

import re
from typing import Any

from runners.adapters.documents import decode, load_json_records
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.fields import Record
from runners.adapters.vllm_bench import read_run

# sglang key -> the vllm bench key read_run understands
RENAMED = {"total_throughput": "total_token_throughput"}
E2E = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_e2e_latency_ms$")
UNLIMITED_RATE = re.compile(r'("request_rate"\s*:\s*)-?Infinity\b')
# Keys only an sglang.bench_serving result carries, for content detection.
SGLANG_BENCH_KEYS = ("total_output_tokens_retokenized", "median_e2e_latency_ms")


def parse_sglang_bench(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Every run in the file, normalized (see docs/adapters.md, "sglang-bench")."""
    with reading(source):
        readable = json_text(decode(text))
        runs = []
        for place, data in load_json_records(readable):
            if not isinstance(data, dict):
                raise FormatProblem(f"{place or 'the file'} is not a JSON object")
            try:
                runs.append(read_run(Record(_as_vllm_bench(data))))
            except FormatProblem as problem:
                raise FormatProblem(f"{place}: {problem}" if place else str(problem)) from None
        for run in runs:
            run["backend"] = run.get("backend") or "sglang"
        return {"tool": "sglang-bench", "tool_version": None, "runs": runs}


def json_text(text: str) -> str:
    """The file as JSON: its unlimited request rate written as vLLM's "inf"."""
    return UNLIMITED_RATE.sub(r'\1"inf"', text)


def is_sglang_bench(payload: dict[str, Any]) -> bool:
    return all(key in payload for key in SGLANG_BENCH_KEYS)


def _as_vllm_bench(data: dict[str, Any]) -> dict[str, Any]:
    translated: dict[str, Any] = {}
    for key, value in data.items():
        match = E2E.match(key)
        if match:
            translated[f"{match.group(1)}_e2el_ms"] = value
        elif key == "server_info" or key == "cache_report":
            continue  # the server's own state: kept in the raw file, not a run key
        else:
            translated[RENAMED.get(key, key)] = value
    errors = data.get("errors")
    if isinstance(errors, list) and all(isinstance(error, str) for error in errors):
        failed = sum(1 for error in errors if error)
        translated.setdefault("failed", failed)
        translated.setdefault("num_prompts", len(errors))
    # sglang's own tag, not --metadata text; its measured mean concurrency is not the cap.
    translated.pop("tag", None)
    translated["sglang_concurrency"] = translated.pop("concurrency", None)
    return translated
