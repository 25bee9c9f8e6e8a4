"""rocm-smi --json, amd-smi metric --json, amd-smi process --json and /opt/rocm/.info/version
for the emulated host, with the host config's GPU fault knobs (gpu_health).

Pure rendering; standard library only.
"""

from __future__ import annotations

import json
from typing import Dict, List, Sequence

from simhost.host.config import AMD_VIOLATIONS, ForeignProcess, HostConfig
from simhost.host.inventory import (
    MIB,
    GpuLive,
    amd_model,
    bus_id,
    gpu_uuid,
    power_draw,
    require_vendor,
    temperature,
)

# nvidia-smi's throttle reasons as amd-smi's nearest violation, so one knob serves both vendors:
# hardware slowdown is the PROCHOT signal, thermal ones the socket and HBM sensors, a power brake
# the voltage regulators, the software power cap amd-smi's package power tracking (PPT).
AMD_VIOLATION_OF = {
    "hw_slowdown": "prochot",
    "hw_thermal_slowdown": "socket_thermal",
    "sw_thermal_slowdown": "hbm_thermal",
    "hw_power_brake_slowdown": "vr_thermal",
    "sw_power_cap": "ppt",
}


def _rocm_card(host: HostConfig, index: int, live: GpuLive) -> Dict[str, str]:
    total = host.gpu_memory_mib * MIB
    used = int(min(live.memory_used_mib * MIB, total))
    util = str(round(live.utilization_pct))
    model = amd_model(host.gpu_model)
    return {
        "Device Name": host.gpu_model,
        "Device ID": model.device_id,
        "Device Rev": "0x00",
        "Subsystem ID": "0x74a1",
        "GUID": str(28000 + index),
        "Unique ID": "0x" + gpu_uuid(host, index).replace("-", "")[:16],
        "VBIOS version": "113-M3000100-102",
        "Temperature (Sensor edge) (C)": "N/A",
        "Temperature (Sensor junction) (C)": "{:.1f}".format(temperature(live) + 5),
        "Temperature (Sensor memory) (C)": "{:.1f}".format(temperature(live)),
        "Performance Level": "auto",
        "Max Graphics Package Power (W)": "{:.1f}".format(model.power_limit_w),
        "Average Graphics Package Power (W)": "{:.1f}".format(power_draw(model, live)),
        "GPU use (%)": util,
        "GPU Memory Allocated (VRAM%)": str(round(100 * used / total)),
        "GPU Memory Read/Write Activity (%)": str(round(live.utilization_pct) // 2),
        "Memory Activity": "N/A",
        "Avg. Memory Bandwidth": "0",
        "GPU memory vendor": "hynix",
        "PCIe Replay Count": "0",
        "Serial Number": "692{:09d}".format(index),
        "Voltage (mV)": "N/A",
        "PCI Bus": "0000:{}:00.0".format(bus_id(index)[1].lower()),
        "VRAM Total Memory (B)": str(total),
        "VRAM Total Used Memory (B)": str(used),
        "VIS_VRAM Total Memory (B)": str(total),
        "VIS_VRAM Total Used Memory (B)": str(used),
        "GTT Total Memory (B)": str(int(host.host_memory_gib) << 30),
        "GTT Total Used Memory (B)": "11354112",
        "Card Series": host.gpu_model,
        "Card Model": model.device_id,
        "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "Card SKU": "M3000100",
        "Node ID": str(index + 2),
        "GFX Version": model.compute_cap,
        "(Topology) Numa Node": str(index // 4),
        "(Topology) Numa Affinity": str(index // 4),
    }


def render_rocm_json(host: HostConfig, live: Sequence[GpuLive]) -> str:
    """`rocm-smi --showallinfo --json`-like: card0..N plus system, every value a string."""
    require_vendor(host, "amd", "rocm-smi")
    payload: Dict[str, Dict[str, str]] = {}
    for index, gpu_live in enumerate(live):
        payload["card{}".format(index)] = _rocm_card(host, index, gpu_live)
    system = {"Driver version": host.driver_version}
    for a in range(len(live)):
        for b in range(a + 1, len(live)):
            system["(Topology) Weight between DRM devices {} and {}".format(a, b)] = "15"
    payload["system"] = system
    return json.dumps(payload, indent=4) + "\n"


def _unit(value: float, unit: str) -> Dict[str, object]:
    return {"value": value, "unit": unit}


def _amd_metric(host: HostConfig, index: int, live: GpuLive) -> Dict[str, object]:
    # amd-smi labels memory "MB" but divides bytes by 1024 * 1024 (amdsmi's source): MiB.
    total = int(host.gpu_memory_mib)
    used = int(min(live.memory_used_mib, total))
    util = round(live.utilization_pct)
    model = amd_model(host.gpu_model)
    return {
        "gpu": index,
        "usage": {
            "gfx_activity": _unit(util, "%"),
            "umc_activity": _unit(util // 2, "%"),
            "mm_activity": _unit(0, "%"),
            "vcn_activity": [_unit(0, "%"), "N/A", "N/A", "N/A"],
        },
        "power": {
            "socket_power": _unit(int(power_draw(model, live)), "W"),
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "throttle_status": "THROTTLED" if _violations(host) else "UNTHROTTLED",
            "power_management": "ENABLED",
        },
        "temperature": {
            "edge": "N/A",
            "hotspot": _unit(temperature(live) + 5, "C"),
            "mem": _unit(temperature(live), "C"),
        },
        "ecc": _ecc(host),
        "ecc_blocks": {"UMC": _ecc_counts(host.gpu_health.ecc_uncorrectable)},
        "mem_usage": {
            "total_vram": _unit(total, "MB"),
            "used_vram": _unit(used, "MB"),
            "free_vram": _unit(total - used, "MB"),
            "total_visible_vram": _unit(total, "MB"),
            "used_visible_vram": _unit(used, "MB"),
            "free_visible_vram": _unit(total - used, "MB"),
        },
        "throttle": _throttle(host),
    }


def _ecc_counts(uncorrectable: int) -> Dict[str, int]:
    return {"correctable_count": 0, "uncorrectable_count": uncorrectable, "deferred_count": 0}


def _ecc(host: HostConfig) -> Dict[str, int]:
    # The whole GPU's counts; the UMC (memory controller) block holds all of them here.
    uncorrectable = host.gpu_health.ecc_uncorrectable
    return {
        "total_correctable_count": 0,
        "total_uncorrectable_count": uncorrectable,
        "total_deferred_count": 0,
        "cache_correctable_count": 0,
        "cache_uncorrectable_count": 0,
    }


def _violations(host: HostConfig) -> List[str]:
    reasons = host.gpu_health.throttle_reasons
    return [AMD_VIOLATION_OF.get(reason, reason) for reason in reasons]


def _throttle(host: HostConfig) -> Dict[str, object]:
    """`metric --throttle` as amdsmi_commands.py prints it for an MI300: accumulators, then
    ACTIVE / NOT ACTIVE per violation, then the share of the last window spent in it."""
    active = set(_violations(host))
    section: Dict[str, object] = {"accumulation_counter": 1000}
    section.update(
        {"{}_accumulated".format(name): 1000 if name in active else 0 for name in AMD_VIOLATIONS}
    )
    for name in AMD_VIOLATIONS:
        section[name + "_violation_status"] = "ACTIVE" if name in active else "NOT ACTIVE"
    for name in AMD_VIOLATIONS:
        section[name + "_violation_activity"] = _unit(100 if name in active else 0, "%")
    return section


def render_amd_smi_json(host: HostConfig, live: Sequence[GpuLive]) -> str:
    """`amd-smi metric --json` as ROCm <= 6.3 prints it: a bare list, one object per GPU."""
    require_vendor(host, "amd", "amd-smi")
    return json.dumps([_amd_metric(host, i, g) for i, g in enumerate(live)], indent=4) + "\n"


def render_amd_smi_process(host: HostConfig) -> str:
    """`amd-smi process --json` (ROCm <= 6.3: a bare list): per GPU the foreign processes the
    config lists, or amd-smi's placeholder when there are none."""
    require_vendor(host, "amd", "amd-smi")
    payload = []
    for index in range(host.gpu_count):
        listed = [
            {"process_info": _process_info(process)}
            for process in host.gpu_health.foreign_processes
            if process.gpu == index
        ]
        none = [{"process_info": "No running processes detected"}]
        payload.append({"gpu": index, "process_list": listed or none})
    return json.dumps(payload, indent=4) + "\n"


def _process_info(process: ForeignProcess) -> Dict[str, object]:
    held = process.used_memory_mib * MIB
    return {
        "name": process.name,
        "pid": process.pid,
        "mem_usage": _unit(held, "B"),
        "usage": {"gfx": _unit(0, "ns"), "enc": _unit(0, "ns")},
        "memory_usage": {
            "gtt_mem": _unit(0, "B"),
            "cpu_mem": _unit(0, "B"),
            "vram_mem": _unit(held, "B"),
        },
    }


def render_rocm_version(host: HostConfig) -> str:
    """What /opt/rocm/.info/version holds on a ROCm host."""
    require_vendor(host, "amd", "rocm")
    return "{}-0\n".format(host.rocm_version or "unknown")
