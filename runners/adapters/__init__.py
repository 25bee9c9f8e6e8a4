"""Output adapters: each external tool's output -> normalized dicts (docs/adapters.md
lists each tool's keys: a bench cell's metrics, server facts, GPU inventory and health).

Owns the tool registry and content detection. Pure: imports no Django and does no I/O
(the command line in __main__ reads the file).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from runners.adapters.aiperf import (
    is_aiperf_record,
    is_aiperf_summary,
    parse_aiperf,
    parse_aiperf_records,
)
from runners.adapters.documents import decode, first_line, load_json_records
from runners.adapters.errors import AdapterError, CounterResetError, FormatProblem, reading
from runners.adapters.gpu_inventory import (
    inventory_source,
    json_inventory_source,
    parse_gpu_inventory,
)
from runners.adapters.guidellm import parse_guidellm
from runners.adapters.host_facts import (
    parse_df,
    parse_engine_version,
    parse_meminfo,
    parse_rocm_version,
    parse_uname,
    parse_vllm_version,
)
from runners.adapters.kernel_log import parse_kernel_log
from runners.adapters.kvbm_metrics import parse_kvbm_metrics
from runners.adapters.lmcache_metrics import parse_lmcache_metrics
from runners.adapters.mooncake_metrics import parse_mooncake_metrics
from runners.adapters.replay_records import parse_replay_records
from runners.adapters.sglang_bench import is_sglang_bench, json_text, parse_sglang_bench
from runners.adapters.sglang_metrics import parse_sglang_metrics
from runners.adapters.vllm_bench import AGGREGATE_KEY, parse_vllm_bench
from runners.adapters.vllm_metrics import parse_vllm_metrics
from runners.adapters.vllm_metrics_delta import metrics_delta

__all__ = [
    "ADAPTERS",
    "AdapterError",
    "CounterResetError",
    "detect",
    "metrics_delta",
    "parse",
]

Adapter = Callable[..., dict[str, Any]]

# tool name -> adapter; adding a tool is one module, one line here and one fixture folder.
ADAPTERS: dict[str, Adapter] = {
    "vllm-bench": parse_vllm_bench,
    "guidellm": parse_guidellm,
    "aiperf": parse_aiperf,
    "aiperf-records": parse_aiperf_records,
    "vllm-metrics": parse_vllm_metrics,
    "gpu-inventory": parse_gpu_inventory,
    "meminfo": parse_meminfo,
    "df": parse_df,
    "uname": parse_uname,
    "vllm-version": parse_vllm_version,
    "rocm-version": parse_rocm_version,
    "kernel-log": parse_kernel_log,
    "replay-records": parse_replay_records,
    "sglang-bench": parse_sglang_bench,
    "sglang-metrics": parse_sglang_metrics,
    "engine-version": parse_engine_version,
    "lmcache-metrics": parse_lmcache_metrics,
    "mooncake-metrics": parse_mooncake_metrics,
    "kvbm-metrics": parse_kvbm_metrics,
}
# Keys only a `vllm bench serve` result carries (besides the mean_ttft_ms-style aggregates).
VLLM_BENCH_KEYS = ("completed", "duration", "request_throughput", "num_prompts", "model_id")
PROMETHEUS_VLLM = re.compile(r"^(# (HELP|TYPE) )?vllm:[a-zA-Z_]", re.MULTILINE)
PROMETHEUS_SGLANG = re.compile(r"^(# (HELP|TYPE) )?sglang:[a-zA-Z_]", re.MULTILINE)
PROMETHEUS_LMCACHE = re.compile(r"^(# (HELP|TYPE) )?lmcache_mp_[a-zA-Z_]", re.MULTILINE)
PROMETHEUS_KVBM = re.compile(r"^(# (HELP|TYPE) )?kvbm_[a-zA-Z_]", re.MULTILINE)
PROMETHEUS_MOONCAKE = re.compile(r"^(# (HELP|TYPE) )?master_key_count\b", re.MULTILINE)
KERNEL_RELEASE = re.compile(r"^\d+\.\d+\.\d+-\S+$", re.ASCII)
# /opt/rocm/.info/version: x.y.z-build, a build number where a kernel has a flavour.
ROCM_INFO = re.compile(r"^\d+\.\d+\.\d+-\d+$", re.ASCII)
VLLM_RELEASE = re.compile(r"^v?0\.\d+(\.\d+)?\S*$", re.ASCII)


def parse(text: str | bytes, *, tool: str | None = None, source: str = "<input>") -> dict[str, Any]:
    """`text` normalized by the adapter of `tool`, detected from the content when None.

    Raises AdapterError (a BenchmarkError) naming `source` for unknown or broken input.
    """
    if tool is None:
        tool = detect(text, source=source)
    adapter = ADAPTERS.get(tool)
    if adapter is None:
        known = ", ".join(ADAPTERS)
        raise AdapterError(f"unknown tool {tool!r} (known: {known})", source=source)
    return adapter(text, source=source)


def detect(text: str | bytes, *, source: str = "<input>") -> str:
    """The name of the tool whose output `text` is; AdapterError when none matches."""
    with reading(source):
        decoded = decode(text)
        tool = _detect_text(decoded)
        if tool is None:
            raise FormatProblem(
                f"unknown tool output starting {first_line(decoded)[:60]!r}; "
                f"name the tool (one of: {', '.join(ADAPTERS)})"
            )
        return tool


def _detect_text(text: str) -> str | None:
    head = text.lstrip()
    if head.startswith(("{", "[")):
        return _detect_json(text)
    if inventory_source(text) is not None:
        return "gpu-inventory"
    line = first_line(text)
    if PROMETHEUS_VLLM.search(text):
        return "vllm-metrics"
    if PROMETHEUS_SGLANG.search(text):
        return "sglang-metrics"
    if PROMETHEUS_LMCACHE.search(text):
        return "lmcache-metrics"
    if PROMETHEUS_MOONCAKE.search(text):
        return "mooncake-metrics"
    if PROMETHEUS_KVBM.search(text):
        return "kvbm-metrics"
    if line.startswith("MemTotal:"):
        return "meminfo"
    if line.startswith("Filesystem") and line.endswith("Mounted on"):
        return "df"
    return _detect_version(text)


def _detect_json(text: str) -> str | None:
    records = load_json_records(json_text(text))
    document = records[0][1]
    if isinstance(document, dict) and isinstance(document.get("benchmarks"), list):
        return "guidellm"
    if len(records) == 1 and json_inventory_source(document) is not None:
        return "gpu-inventory"
    # Before vllm-bench: an AIPerf summary also holds a `request_throughput` key.
    if is_aiperf_summary(document):
        return "aiperf"
    if is_aiperf_record(document):
        return "aiperf-records"
    first = document[0] if isinstance(document, list) and document else document
    if isinstance(first, dict) and is_sglang_bench(first):
        return "sglang-bench"
    if isinstance(first, dict) and _is_vllm_bench(first):
        return "vllm-bench"
    return None


def _is_vllm_bench(payload: dict[str, Any]) -> bool:
    return any(key in payload for key in VLLM_BENCH_KEYS) or any(
        AGGREGATE_KEY.match(key) for key in payload
    )


def _detect_version(text: str) -> str | None:
    # A lone version line is ambiguous: vLLM releases are 0.x, kernels x.y.z-flavour, ROCm
    # x.y.z-build. Programs should name the tool; this is a guess by shape.
    words = text.split()
    last = words[-1] if words else ""
    if (len(words) == 1 and ROCM_INFO.match(last)) or "ROCm version:" in text:
        return "rocm-version"
    if len(words) == 1 and KERNEL_RELEASE.match(last):
        return "uname"
    if VLLM_RELEASE.match(last) or "No module named 'vllm'" in text:
        return "vllm-version"
    return None
