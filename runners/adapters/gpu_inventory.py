"""The `gpu-inventory` tool: tells nvidia-smi XML/CSV, rocm-smi and amd-smi output apart.

Pure: no I/O, no Django. The form itself is in runners.adapters.inventory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runners.adapters.amd_smi import gpu_entries, parse_amd_smi
from runners.adapters.documents import decode, first_line, load_json
from runners.adapters.errors import FormatProblem, reading
from runners.adapters.nvidia_smi import (
    QUERY_GPU_FIELDS,
    csv_header_fields,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
)
from runners.adapters.rocm_smi import is_rocm_smi, parse_rocm_smi

SOURCES: dict[str, Callable[[str], dict[str, Any]]] = {
    "nvidia-smi-xml": parse_nvidia_smi_xml,
    "nvidia-smi-csv": parse_nvidia_smi_csv,
    "rocm-smi-json": parse_rocm_smi,
    "amd-smi-json": parse_amd_smi,
}


def parse_gpu_inventory(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Any supported GPU tool's output as the inventory form (see docs/adapters.md)."""
    with reading(source):
        decoded = decode(text)
        kind = inventory_source(decoded)
        if kind is None:
            raise FormatProblem(
                "not GPU inventory output (expected nvidia-smi -q -x, nvidia-smi --query-gpu "
                "CSV, rocm-smi --json or amd-smi --json)"
            )
        return SOURCES[kind](decoded)


def inventory_source(text: str) -> str | None:
    """Which GPU tool wrote `text`, or None when none of them did (FormatProblem: broken JSON)."""
    head = text.lstrip()
    if head.startswith("<"):
        return "nvidia-smi-xml" if "<nvidia_smi_log" in head[:4096] else None
    if head.startswith(("{", "[")):
        return _json_source(text)
    return "nvidia-smi-csv" if _looks_like_query_csv(text) else None


def _json_source(text: str) -> str | None:
    # Broken JSON is reported as such, not as "unknown tool".
    return json_inventory_source(load_json(text))


def json_inventory_source(document: Any) -> str | None:
    """Which GPU tool wrote this JSON document, or None."""
    if is_rocm_smi(document):
        return "rocm-smi-json"
    return "amd-smi-json" if gpu_entries(document) is not None else None


def _looks_like_query_csv(text: str) -> bool:
    line = first_line(text)
    if csv_header_fields(line) is not None:
        return True
    # Headerless (`noheader`) rows must carry exactly the fields Tollgate's probe asks for.
    cells = [cell.strip() for cell in line.split(",")]
    return len(cells) == len(QUERY_GPU_FIELDS) and cells[0].isascii() and cells[0].isdigit()
