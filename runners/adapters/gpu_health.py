"""Whether GPUs are fit to measure, as `nvidia-smi -q -x` reports it: compute processes holding
them, memory in use, active clock-throttle reasons, volatile uncorrectable ECC errors.

Pure: no I/O, no Django. Kept apart from the inventory form (runners.adapters.inventory): the
inventory is what the contract accepted; this is the state of the host at one moment.
"""

from __future__ import annotations

from typing import Any
from xml.etree.ElementTree import Element

from runners.adapters.documents import load_xml
from runners.adapters.errors import FormatProblem
from runners.adapters.inventory import memory_mib, text_value

# Reasons that mean the GPU runs slower than it should; idle, application clocks, sync boost
# and display settings are normal states, not faults.
SLOWDOWN_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)
# nvidia-smi renamed clocks_throttle_reasons to clocks_event_reasons (driver 535+).
REASON_BLOCKS = ("clocks_event_reasons", "clocks_throttle_reasons")


def parse_gpu_health_xml(text: str) -> dict[str, Any]:
    root = load_xml(text)
    if root.tag != "nvidia_smi_log":
        raise FormatProblem(f"XML root is <{root.tag[:40]}>, expected <nvidia_smi_log>")
    return {
        "tool": "gpu-health",
        "source": "nvidia-smi-xml",
        "gpus": [_gpu(index, gpu) for index, gpu in enumerate(root.findall("gpu"))],
    }


def _gpu(index: int, gpu: Element) -> dict[str, Any]:
    return {
        "index": index,
        "pci_bus_id": gpu.get("id"),
        "memory_used_mib": memory_mib(
            text_value(gpu.findtext("fb_memory_usage/used")), f"gpu[{index}] fb_memory_usage"
        ),
        "compute_processes": _processes(index, gpu),
        "slowdown_reasons": _slowdowns(gpu),
        "ecc_uncorrectable": _ecc_uncorrectable(gpu),
    }


def _processes(index: int, gpu: Element) -> list[dict[str, Any]]:
    found = []
    for info in gpu.findall("processes/process_info"):
        kind = text_value(info.findtext("type")) or ""
        if "C" not in kind:  # "G" is a graphics client such as Xorg, not a job on the GPU
            continue
        found.append(
            {
                "pid": text_value(info.findtext("pid")),
                "name": text_value(info.findtext("process_name")),
                "used_memory_mib": memory_mib(
                    text_value(info.findtext("used_memory")), f"gpu[{index}] process"
                ),
            }
        )
    return found


def _slowdowns(gpu: Element) -> list[str]:
    active = []
    for block in REASON_BLOCKS:
        for element in gpu.findall(f"{block}/*"):
            name = element.tag.split("_reason_", 1)[-1]
            if name in SLOWDOWN_REASONS and (element.text or "").strip() == "Active":
                active.append(name)
    return active


def _ecc_uncorrectable(gpu: Element) -> int | None:
    """Volatile uncorrectable errors since the driver loaded; None when the GPU reports none."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    counts = [
        text_value(element.text)
        for element in volatile.iter()
        if element.tag.endswith("uncorrectable") or element.tag == "double_bit"
    ]
    numbers = [int(c) for c in counts if c is not None and c.isdigit()]
    return sum(numbers) if numbers else None
