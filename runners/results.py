"""What tool outputs prove, as plain facts for the decision engine: a probe's G1 facts, and
what a server's /metrics say about the arm it ran and its offload-tier hits.

Pure (adapters only): used by the gate programs and by uploaded results alike.
"""

from __future__ import annotations

import json

from runners import adapters

PROBE_TOOLS = {
    "vllm_version": "vllm-version",
    "meminfo": "meminfo",
    "disk": "df",
    "kernel": "uname",
    "rocm_version": "rocm-version",
}


def probe_tool(name: str) -> str:
    return "gpu-inventory" if name.startswith("gpu_") else PROBE_TOOLS.get(name, name)


def probe_facts(name: str, output: str) -> dict:
    """The G1 facts one probe's output gives; an unreadable output gives none."""
    try:
        if name.startswith("gpu_"):
            return {"gpu_inventory": adapters.parse(output, tool="gpu-inventory")}
        if name == "offload_tier":
            return {"offload_tier": _tier(json.loads(output))}
        parsed = adapters.parse(output, tool=PROBE_TOOLS.get(name))
    except (adapters.AdapterError, ValueError, TypeError):
        return {}
    return _host_fact(name, parsed)


def _host_fact(name: str, parsed: dict) -> dict:
    if name == "vllm_version":
        return {"vllm_version": parsed.get("version")}
    if name == "meminfo":
        return {"host_memory_bytes": parsed.get("mem_total_bytes")}
    if name == "disk":
        mounts = parsed.get("mounts") or [{}]
        return {"free_disk_bytes": mounts[-1].get("available_bytes")}
    if name == "kernel":
        return {"kernel": parsed.get("kernel_release")}
    if name == "rocm_version":
        return {"rocm_version": parsed.get("version")}
    return {}


def _tier(document: dict) -> dict:
    capacity = document.get("capacity_gib")
    return {
        "present": bool(document.get("present")),
        "capacity_gib": float(capacity) if capacity is not None else None,
    }


def server_facts(first: dict, last: dict) -> dict:
    """What the server's /metrics prove about one benchmark: the arm it ran and its hits."""
    delta = adapters.metrics_delta(first, last)
    config = last.get("cache_config") or {}
    offload_size = config.get("kv_offloading_size")
    return {
        "prefix_caching": config.get("enable_prefix_caching"),
        "offload_enabled": None if "kv_offloading_size" not in config else bool(offload_size),
        "external_hit_rate": delta["external_prefix_cache_hit_rate"],
        "prefix_cache_hit_rate": delta["prefix_cache_hit_rate"],
        # Two scrapes cannot see the peak; the bench's own max_concurrency is checked instead.
        "peak_running": None,
    }
