"""Reads `amd-smi metric --json` and `amd-smi static --json` (a bare list or `{"gpu_data": [...]}`).

Pure: no I/O, no Django. Produces the inventory form of runners.adapters.inventory; its readers
(gpu_list, amd_section, amd_leaf, amd_memory_mib) serve the fitness adapter amd_health too.
"""

from __future__ import annotations

from typing import Any

from runners.adapters.documents import describe, load_json
from runners.adapters.errors import FormatProblem
from runners.adapters.fields import finite, whole
from runners.adapters.inventory import (
    build_gpu,
    build_inventory,
    is_unavailable,
    mebibytes,
    text_value,
)

# Sections that only amd-smi writes; one of them marks a GPU entry.
AMD_SECTIONS = ("usage", "mem_usage", "asic", "vram", "power", "clock")


def parse_amd_smi(text: str) -> dict[str, Any]:
    """GPUs from `metric` (usage, mem_usage) and/or `static` (asic, vram, driver) sections."""
    entries = gpu_entries(load_json(text))
    if entries is None:
        raise FormatProblem("amd-smi JSON is neither a list of GPUs nor {gpu_data: [...]}")
    gpus = [_gpu(position, entry) for position, entry in enumerate(entries)]
    driver = amd_section(entries[0], "driver", "gpu[0]") if entries else None
    version = text_value(driver.get("version")) if driver else None
    return build_inventory("amd-smi-json", gpus, driver_version=version)


def gpu_entries(document: Any) -> list[Any] | None:
    """The per-GPU entries when `document` looks like amd-smi static/metric output, else None."""
    entries = gpu_list(document)
    if entries is None:
        return None
    if not any(section in entry for entry in entries for section in AMD_SECTIONS):
        return None
    return entries


def gpu_list(document: Any) -> list[dict[str, Any]] | None:
    """amd-smi's per-GPU objects (each with "gpu"), whatever the subcommand: a bare list up to
    ROCm 6.3, `{"gpu_data": [...]}` after (amdsmi_logger.py combine_arrays_to_json); else None."""
    if isinstance(document, dict) and isinstance(document.get("gpu_data"), list):
        document = document["gpu_data"]
    if not isinstance(document, list) or not document:
        return None
    if not all(isinstance(entry, dict) and "gpu" in entry for entry in document):
        return None
    return document


def _gpu(position: int, entry: Any) -> dict[str, Any]:
    where = f"gpu[{position}]"
    usage = amd_section(entry, "usage", where)
    memory = amd_section(entry, "mem_usage", where)
    asic = amd_section(entry, "asic", where)
    vram = amd_section(entry, "vram", where)
    bus = amd_section(entry, "bus", where)
    total = amd_memory_mib(memory.get("total_vram"), f"{where}.mem_usage.total_vram")
    if total is None:
        total = amd_memory_mib(vram.get("size"), f"{where}.vram.size")
    return build_gpu(
        whole(entry["gpu"], f"{where}.gpu"),
        text_value(asic.get("market_name")),
        uuid=text_value(asic.get("asic_serial")),
        bus_id=text_value(bus.get("bdf")),
        memory_total_mib=total,
        memory_used_mib=amd_memory_mib(memory.get("used_vram"), f"{where}.mem_usage.used_vram"),
        utilization_pct=_percent(usage.get("gfx_activity"), f"{where}.usage.gfx_activity"),
    )


def amd_section(entry: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """The object at `entry[key]`; {} when absent or "N/A" (amd-smi's word for a failed read)."""
    section = entry.get(key)
    if section is None or (isinstance(section, str) and is_unavailable(section)):
        return {}
    if not isinstance(section, dict):
        raise FormatProblem(f"{where}.{key} is {describe(section)}, expected an object")
    return section


def amd_leaf(value: Any, where: str) -> tuple[float, str] | None:
    """A `{"value": N, "unit": "MB"}` leaf (or a bare number); None for "N/A"."""
    if value is None or (isinstance(value, str) and is_unavailable(value)):
        return None
    if isinstance(value, dict):
        unit = value.get("unit", "")
        if not isinstance(unit, str):
            raise FormatProblem(f"{where}.unit is {describe(unit)}, expected a string")
        number = value.get("value")
        if isinstance(number, str) and is_unavailable(number):
            return None
        return finite(number, f"{where}.value"), unit
    return finite(value, where), ""


def amd_memory_mib(value: Any, where: str) -> float | None:
    """A memory leaf in MiB; None for "N/A"."""
    leaf = amd_leaf(value, where)
    return None if leaf is None else mebibytes(*leaf, where)


def _percent(value: Any, where: str) -> float | None:
    leaf = amd_leaf(value, where)
    if leaf is None:
        return None
    if leaf[1] not in ("", "%"):
        raise FormatProblem(f"{where} has unit {describe(leaf[1])}, expected %")
    return leaf[0]
