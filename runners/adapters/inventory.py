"""The normalized GPU inventory form and the value readers its source adapters share.

Pure; imports no Django. Source adapters: nvidia_smi, rocm_smi, amd_smi; dispatch: gpu_inventory.
"""

from __future__ import annotations

import math
import re
from typing import Any

from runners.adapters.errors import FormatProblem, excerpt

MIB = 1024 * 1024
# Memory units as the GPU tools print them, in MiB. amd-smi labels MiB "MB": it divides the
# byte count by 1024*1024 (amdsmi_cli/amdsmi_commands.py) before printing.
MEMORY_UNITS_MIB = {
    "B": 1 / MIB,
    "KiB": 1 / 1024,
    "KB": 1 / 1024,
    "MiB": 1.0,
    "MB": 1.0,
    "GiB": 1024.0,
    "GB": 1024.0,
}
VALUE_WITH_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)$", re.ASCII)
# Words the tools print instead of a number: the value exists but is unavailable.
UNAVAILABLE = (
    "n/a",
    "not supported",
    "not available",
    "unknown error",
    "insufficient permissions",
    "requested functionality has been deprecated",
    "gpu requires reset",
    "gpu is lost",
    "",
)


def build_inventory(
    source: str,
    gpus: list[dict[str, Any]],
    *,
    driver_version: str | None = None,
    cuda_version: str | None = None,
    rocm_version: str | None = None,
) -> dict[str, Any]:
    return {
        "tool": "gpu-inventory",
        "source": source,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "rocm_version": rocm_version,
        "gpus": gpus,
    }


def build_gpu(
    index: int,
    name: str | None,
    *,
    uuid: str | None = None,
    bus_id: str | None = None,
    memory_total_mib: float | None = None,
    memory_used_mib: float | None = None,
    utilization_pct: float | None = None,
) -> dict[str, Any]:
    return {
        "index": index,
        "name": name,
        "uuid": uuid,
        "bus_id": bus_id,
        "memory_total_mib": memory_total_mib,
        "memory_used_mib": memory_used_mib,
        "utilization_pct": utilization_pct,
    }


def is_unavailable(text: str) -> bool:
    """True for N/A-style placeholders, bracketed or not (`[N/A]`, `Not Supported`, ...)."""
    return text.strip().strip("[]").strip().lower() in UNAVAILABLE


def text_value(value: Any) -> str | None:
    """A string field, None when absent or a placeholder."""
    if value is None:
        return None
    if not isinstance(value, str):
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else None
    return None if is_unavailable(value) else value.strip()


def number_with_unit(text: str, where: str) -> tuple[float, str] | None:
    """`"22 MiB"` -> (22.0, "MiB"); None for a placeholder; anything else is refused."""
    if is_unavailable(text):
        return None
    match = VALUE_WITH_UNIT.match(text.strip())
    if match is None:
        raise FormatProblem(f"{where} is {excerpt(text)}, expected a number")
    number = float(match.group(1))
    if not math.isfinite(number):
        raise FormatProblem(f"{where} is {excerpt(text)}, expected a finite number")
    return number, match.group(2)


def mebibytes(number: float, unit: str, where: str, *, default_unit: str = "MiB") -> float:
    """`number` in `unit` (or `default_unit` when the tool printed none) converted to MiB."""
    factor = MEMORY_UNITS_MIB.get(unit or default_unit)
    if factor is None:
        raise FormatProblem(f"{where} has unknown memory unit {excerpt(unit)}")
    return number * factor


def memory_mib(text: str | None, where: str, *, default_unit: str = "MiB") -> float | None:
    """A memory field printed as text (`"23028 MiB"`, `"143771"`) in MiB."""
    if text is None:
        return None
    parsed = number_with_unit(text, where)
    return None if parsed is None else mebibytes(*parsed, where, default_unit=default_unit)


def percent(text: str | None, where: str) -> float | None:
    """A utilization field printed as text (`"0 %"`, `"100"`) in percent."""
    if text is None:
        return None
    parsed = number_with_unit(text, where)
    if parsed is None:
        return None
    number, unit = parsed
    if unit not in ("", "%"):
        raise FormatProblem(f"{where} is {excerpt(text)}, expected a percentage")
    return number
