"""Whether AMD GPUs are fit to measure, as `amd-smi metric --json` and `amd-smi process --json`
report it, in the form runners.adapters.gpu_health gives for nvidia-smi: memory in use, active
thermal or hardware clock violations, uncorrectable ECC errors, compute processes.

Pure: no I/O, no Django. Layouts from ROCm/amdsmi's amdsmi_cli/amdsmi_commands.py (`metric`:
the `mem_usage`, `ecc`, `ecc_blocks` and `throttle` sections; `process`: per GPU a
`process_list` of `{"process_info": {...}}`, or of `{"process_info": "No running processes
detected"}` when there are none) and a real `metric` capture (tests/fixtures/amd-smi).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from runners.adapters.amd_smi import amd_leaf, amd_memory_mib, amd_section, gpu_list
from runners.adapters.documents import describe, load_json
from runners.adapters.errors import FormatProblem
from runners.adapters.fields import whole
from runners.adapters.inventory import is_unavailable, mebibytes, text_value

# amd-smi's `throttle` section names each violation `<name>_violation_status` (ACTIVE / NOT
# ACTIVE) and `<name>_violation_activity` (% of the last sample window spent in it); ROCm 7 adds
# per-XCP lists and the gfx_clk_below_host_limit_* family (two spellings across releases).
# Heat and the PROCHOT hardware signal are faults of the host, like nvidia-smi's hw/sw thermal
# and hardware slowdowns. Package power (ppt, *_pwr / *_power) is the power cap a GPU under load
# reaches by design (nvidia-smi's sw_power_cap, not a fault there either), low_utilization is an
# idle GPU, and the *_total counters fold power in.
SLOWDOWN_VIOLATIONS = (
    "prochot",
    "socket_thermal",
    "vr_thermal",
    "hbm_thermal",
    "gfx_clk_below_host_limit_thm",
    "gfx_clk_below_host_limit_thermal",
)
# Activity is a share of the sample window; a brief dip below a few percent moves no
# measurement this gate takes, an ACTIVE status counts whatever the share.
VIOLATION_ACTIVITY_MIN_PCT = 5.0
# Uncorrectable and deferred errors both left bad data in memory: deferred ones are poisoned
# lines the hardware has not consumed yet (AMD's RAS counts them apart, amdsmi reports both).
ECC_TOTALS = ("total_uncorrectable_count", "total_deferred_count")
ECC_BLOCK_COUNTS = ("uncorrectable_count", "deferred_count")
# The profile probes (gates/builtin_profiles/*.json) that print what this module reads.
AMD_METRIC = "amd_metric"
AMD_PROCESS = "amd_process"
T = TypeVar("T")


def parse_amd_health(
    metric: str,
    processes: str | None = None,
    *,
    bus_ids: Mapping[int, str | None] | None = None,
) -> dict[str, Any]:
    """The health form from `amd-smi metric --json` and, when given, `amd-smi process --json`;
    a FormatProblem names the output and the field.

    amd-smi's metric output has no PCI address, so `bus_ids` (GPU index -> address, from the
    inventory probe) names the GPUs for the kernel log; without processes none are listed."""
    listed = {}
    if processes is not None:
        listed = _named("process", lambda: parse_amd_processes(processes))
    gpus = _named("metric", lambda: _metric_gpus(metric, listed, bus_ids or {}))
    return {"tool": "gpu-health", "source": "amd-smi-json", "gpus": gpus}


def inventory_bus_ids(inventory: Mapping[str, Any] | None) -> dict[int, str | None]:
    """GPU index -> PCI address, from the gpu-inventory form of the host's GPU probe (amd-smi
    static's `bus.bdf`, rocm-smi's `PCI Bus`): the `bus_ids` parse_amd_health names GPUs by."""
    gpus = (inventory or {}).get("gpus") or []
    return {gpu.get("index"): gpu.get("bus_id") for gpu in gpus}


def _metric_gpus(
    text: str, listed: dict[int, list[dict[str, Any]]], bus_ids: Mapping[int, str | None]
) -> list[dict[str, Any]]:
    gpus = []
    for position, entry in enumerate(_entries(load_json(text))):
        where = f"gpu[{position}]"
        index = whole(entry["gpu"], f"{where}.gpu")
        gpus.append(
            {
                "index": index,
                "pci_bus_id": bus_ids.get(index),
                "memory_used_mib": _used_vram(entry, where),
                "compute_processes": listed.get(index, []),
                "slowdown_reasons": _violations(entry, where),
                "ecc_uncorrectable": _ecc_uncorrectable(entry, where),
            }
        )
    return gpus


def parse_amd_processes(text: str) -> dict[int, list[dict[str, Any]]]:
    """GPU index -> the processes `amd-smi process --json` lists on it (none: an empty list)."""
    found: dict[int, list[dict[str, Any]]] = {}
    for position, entry in enumerate(_entries(load_json(text))):
        where = f"gpu[{position}]"
        listed = entry.get("process_list", [])
        if not isinstance(listed, list):
            raise FormatProblem(f"{where}.process_list is {describe(listed)}, expected a list")
        processes = [_process(item, f"{where}.process_list[{i}]") for i, item in enumerate(listed)]
        index = whole(entry["gpu"], f"{where}.gpu")
        found[index] = [process for process in processes if process is not None]
    return found


def _named(subcommand: str, read: Callable[[], T]) -> T:
    """`read()`, its FormatProblem saying which amd-smi output it came from."""
    try:
        return read()
    except FormatProblem as problem:
        raise FormatProblem(f"amd-smi {subcommand} output: {problem}") from None


def _entries(document: Any) -> list[dict[str, Any]]:
    entries = gpu_list(document)
    if entries is None:
        raise FormatProblem("neither a list of GPUs nor {gpu_data: [...]}")
    return entries


def _process(item: Any, where: str) -> dict[str, Any] | None:
    if not isinstance(item, dict) or "process_info" not in item:
        raise FormatProblem(f"{where} is {describe(item)}, expected {{process_info: ...}}")
    info = item["process_info"]
    if isinstance(info, str):
        return None  # "No running processes detected" (older releases: "N/A")
    if not isinstance(info, dict):
        raise FormatProblem(f"{where}.process_info is {describe(info)}, expected an object")
    memory = amd_section(info, "memory_usage", f"{where}.process_info")
    vram = amd_memory_mib(memory.get("vram_mem"), f"{where}.process_info.memory_usage.vram_mem")
    if vram is None:  # mem_usage is every kind of memory the process holds; VRAM when known
        vram = _bytes_mib(info.get("mem_usage"), f"{where}.process_info.mem_usage")
    return {"pid": text_value(info.get("pid")), "name": _name(info), "used_memory_mib": vram}


def _name(info: dict[str, Any]) -> str | None:
    name = info.get("name")
    # amd-smi prints "N/A" for another user's process unless run as root.
    return text_value(name) if isinstance(name, str) else None


def _bytes_mib(value: Any, where: str) -> float | None:
    leaf = amd_leaf(value, where)
    return None if leaf is None else mebibytes(leaf[0], leaf[1] or "B", where)


def _used_vram(entry: dict[str, Any], where: str) -> float | None:
    memory = amd_section(entry, "mem_usage", where)
    return amd_memory_mib(memory.get("used_vram"), f"{where}.mem_usage.used_vram")


def _violations(entry: dict[str, Any], where: str) -> list[str]:
    """Heat or PROCHOT violations active now, by amd-smi's name without the suffix.

    power.throttle_status is left out on purpose: amd-smi prints THROTTLED whenever the SMU's
    throttler bits are non-zero, whatever the reason, and a real idle GPU clocked down to 60 MHz
    reads THROTTLED (the capture in tests/fixtures/amd-smi), so alone it cannot tell a fault."""
    throttle = amd_section(entry, "throttle", where)
    active = []
    for name in SLOWDOWN_VIOLATIONS:
        status_key, activity_key = f"{name}_violation_status", f"{name}_violation_activity"
        status = _leaves(throttle.get(status_key), f"{where}.throttle.{status_key}")
        activity_where = f"{where}.throttle.{activity_key}"
        activity = _leaves(throttle.get(activity_key), activity_where)
        if "ACTIVE" in status or any(_over_threshold(v, activity_where) for v in activity):
            active.append(name)
    return active


def _over_threshold(value: Any, where: str) -> bool:
    if isinstance(value, str):
        return False  # a status word where a share was expected says nothing more
    leaf = amd_leaf(value, where)
    return leaf is not None and leaf[0] >= VIOLATION_ACTIVITY_MIN_PCT


def _leaves(value: Any, where: str) -> list[Any]:
    """The values of a throttle field: one, a list, or per-XCP lists (ROCm 7), placeholders
    dropped; a status word comes back upper-cased."""
    if value is None or (isinstance(value, str) and is_unavailable(value)):
        return []
    if isinstance(value, str):
        return [value.strip().upper()]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item, where)]
    if isinstance(value, dict) and "value" not in value:
        return [leaf for item in value.values() for leaf in _leaves(item, where)]
    if isinstance(value, (dict, int, float)) and not isinstance(value, bool):
        return [value]
    raise FormatProblem(f"{where} is {describe(value)}, expected a status or a percentage")


def _ecc_uncorrectable(entry: dict[str, Any], where: str) -> int | None:
    """Uncorrectable plus deferred errors since the driver loaded; None when amd-smi could
    read no count. The per-block counts add up to the total; the larger sum wins in case one
    of the two reads failed part-way."""
    ecc = amd_section(entry, "ecc", where)
    totals = _sum_counts([(ecc.get(key), f"{where}.ecc.{key}") for key in ECC_TOTALS])
    per_block = _sum_counts(
        [
            (counts.get(key), f"{where}.ecc_blocks.{block}.{key}")
            for block, counts in _blocks(entry, where)
            for key in ECC_BLOCK_COUNTS
        ]
    )
    sums = [total for total in (totals, per_block) if total is not None]
    return max(sums) if sums else None


def _blocks(entry: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    blocks = amd_section(entry, "ecc_blocks", where)
    return [(name, amd_section(blocks, name, f"{where}.ecc_blocks")) for name in blocks]


def _sum_counts(fields: list[tuple[Any, str]]) -> int | None:
    counts = [count for value, where in fields if (count := _count(value, where)) is not None]
    return sum(counts) if counts else None


def _count(value: Any, where: str) -> int | None:
    if value is None or (isinstance(value, str) and is_unavailable(value)):
        return None
    return whole(value, where)
