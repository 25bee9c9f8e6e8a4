"""Types the labels of vLLM's `vllm:cache_config_info` (all strings on the wire) into values.

It proves which arm a server really ran (prefix caching on/off, offload size). Pure; no Django.
"""

from __future__ import annotations

import math
import re
from typing import Any

from runners.adapters.errors import FormatProblem, excerpt

# Labels whose type the gates rely on; any other label is typed by its look (see _typed).
INTEGER_LABELS = (
    "block_size",
    "num_gpu_blocks",
    "num_cpu_blocks",
    "num_gpu_blocks_override",
    "kv_cache_size_tokens",
    "kv_cache_memory_bytes",
    "sliding_window",
    "mamba_block_size",
    "hash_block_size",
)
FLOAT_LABELS = ("kv_offloading_size", "gpu_memory_utilization", "kv_cache_max_concurrency")
BOOLEAN_LABELS = ("enable_prefix_caching", "calculate_kv_scales", "is_attention_free")
# Python's str() of None and of booleans is how vLLM fills these labels.
NONE_TEXT = "None"
BOOLEAN_TEXT = {"True": True, "False": False, "true": True, "false": False}
PLAIN_INTEGER = re.compile(r"^-?\d{1,18}$")
PLAIN_DECIMAL = re.compile(r"^-?\d{1,18}\.\d{1,18}$")
# Labels that say where the series came from, not how the cache is configured.
NOT_CONFIG = ("engine", "model_name")


def gpu_kv_cache_tokens(config: dict[str, Any] | None) -> int | None:
    """The GPU KV cache size in tokens a typed cache config says (vLLM: blocks x block size;
    SGLang: its token count), or None when it says none."""
    config = config or {}
    tokens = config.get("kv_cache_size_tokens")
    if tokens is None and config.get("num_gpu_blocks") and config.get("block_size"):
        tokens = config["num_gpu_blocks"] * config["block_size"]
    return int(tokens) if tokens else None


def read_cache_config(series: list[tuple[dict[str, str], float]]) -> dict[str, Any] | None:
    """The typed labels of the lowest-numbered engine's info series; None when absent.

    `kv_offloading_size` is GiB (total across TP ranks) or None when offloading is off.
    """
    if not series:
        return None
    labels = min((labels for labels, _ in series), key=_engine_order)
    return {
        name: typed_label(name, value)
        for name, value in sorted(labels.items())
        if name not in NOT_CONFIG
    }


def typed_label(name: str, value: str) -> Any:
    """One label value as bool, int, float, None or the string itself."""
    if value == NONE_TEXT:
        return None
    if name in BOOLEAN_LABELS:
        if value not in BOOLEAN_TEXT:
            raise FormatProblem(f"cache_config_info label {name} is {excerpt(value)}, not a bool")
        return BOOLEAN_TEXT[value]
    if name in INTEGER_LABELS:
        return _integer(name, value)
    if name in FLOAT_LABELS:
        return _float(name, value)
    return _typed(value)


def _engine_order(labels: dict[str, str]) -> tuple[float, str]:
    engine = labels.get("engine", "")
    return (int(engine) if engine.isdigit() and len(engine) < 19 else math.inf, engine)


def _integer(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FormatProblem(
            f"cache_config_info label {name} is {excerpt(value)}, not an integer"
        ) from None


def _float(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise FormatProblem(f"cache_config_info label {name} is {excerpt(value)}, not a number")
    return number


def _typed(value: str) -> Any:
    """Labels nobody relies on: booleans and plain numbers typed, anything else kept as text."""
    if value in BOOLEAN_TEXT:
        return BOOLEAN_TEXT[value]
    if PLAIN_INTEGER.match(value):
        return int(value)
    if PLAIN_DECIMAL.match(value):
        return float(value)
    return value
