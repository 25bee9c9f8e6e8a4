"""nvidia-smi's output for the emulated host: `-q -x` XML (DTD v12) and `--query-gpu` CSV.

Pure rendering; standard library only.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Dict, Optional, Sequence, Tuple

from simhost.host.config import THROTTLE_REASONS, HostConfig
from simhost.host.inventory import (
    GpuLive,
    SmiQueryError,
    bus_id,
    gpu_uuid,
    nvidia_model,
    power_draw,
    require_vendor,
    temperature,
)

DEFAULT_QUERY = "index,name,memory.total,memory.used,utilization.gpu,driver_version"


def _sub(parent: ET.Element, tag: str, text: Optional[str] = None) -> ET.Element:
    element = ET.SubElement(parent, tag)
    if text is not None:
        element.text = text
    return element


def _subtree(parent: ET.Element, tag: str, values: Sequence[Tuple[str, str]]) -> ET.Element:
    element = _sub(parent, tag)
    for name, value in values:
        _sub(element, name, value)
    return element


def _memory(total: int, used_mib: float) -> Tuple[int, int, int]:
    """(reserved, used, free) MiB as nvidia-smi splits a GPU's framebuffer."""
    reserved = min(total, 529)
    used = int(min(used_mib, total - reserved))
    return reserved, used, total - reserved - used


def _identity(gpu: ET.Element, host: HostConfig, index: int) -> None:
    model = nvidia_model(host.gpu_model)
    pci_id, bus = bus_id(index)
    _sub(gpu, "product_name", host.gpu_model)
    _sub(gpu, "product_brand", model.brand)
    _sub(gpu, "product_architecture", model.architecture)
    for tag, text in (("display_mode", "Disabled"), ("display_active", "Disabled")):
        _sub(gpu, tag, text)
    _sub(gpu, "persistence_mode", "Enabled")
    _sub(gpu, "addressing_mode", "None")
    _subtree(gpu, "mig_mode", [("current_mig", "Disabled"), ("pending_mig", "Disabled")])
    _sub(gpu, "mig_devices", "None")
    _sub(gpu, "accounting_mode", "Disabled")
    _sub(gpu, "serial", "{:013d}".format(1652022000000 + index))
    _sub(gpu, "uuid", "GPU-" + gpu_uuid(host, index))
    _sub(gpu, "minor_number", str(index))
    _sub(gpu, "vbios_version", "96.00.99.00.01")
    _sub(gpu, "multigpu_board", "No")
    _sub(gpu, "gpu_module_id", str(index + 1))
    pci = [("pci_bus", bus), ("pci_device", "00"), ("pci_domain", "0000")]
    pci += [("pci_device_id", model.device_id), ("pci_bus_id", pci_id)]
    _subtree(_subtree(gpu, "pci", pci), "pci_gpu_link_info", [])


def _load(gpu: ET.Element, host: HostConfig, live: GpuLive) -> None:
    """Memory, utilization, temperature, power and clocks: the parts that move."""
    model = nvidia_model(host.gpu_model)
    reserved, used, free = _memory(host.gpu_memory_mib, live.memory_used_mib)
    _sub(gpu, "fan_speed", "N/A")
    _sub(gpu, "performance_state", "P0")
    memory = [
        ("total", host.gpu_memory_mib),
        ("reserved", reserved),
        ("used", used),
        ("free", free),
    ]
    _subtree(gpu, "fb_memory_usage", [(tag, "{} MiB".format(v)) for tag, v in memory])
    _sub(gpu, "compute_mode", "Default")
    util = round(live.utilization_pct)
    _subtree(
        gpu,
        "utilization",
        [
            ("gpu_util", "{} %".format(util)),
            ("memory_util", "{} %".format(util // 2)),
            ("encoder_util", "0 %"),
            ("decoder_util", "0 %"),
        ],
    )
    _subtree(gpu, "ecc_mode", [("current_ecc", "Enabled"), ("pending_ecc", "Enabled")])
    ecc = str(host.gpu_health.ecc_uncorrectable)
    errors = [("sram_correctable", "0"), ("sram_uncorrectable", "0")]
    errors += [("dram_correctable", "0"), ("dram_uncorrectable", ecc)]
    _subtree(_sub(gpu, "ecc_errors"), "volatile", errors)
    _subtree(gpu, "temperature", [("gpu_temp", "{} C".format(temperature(live)))])
    limit = "{:.2f} W".format(model.power_limit_w)
    power = [("power_state", "P0"), ("power_draw", "{:.2f} W".format(power_draw(model, live)))]
    power += [
        (tag, limit) for tag in ("current_power_limit", "default_power_limit", "max_power_limit")
    ]
    _subtree(gpu, "gpu_power_readings", power)
    _subtree(gpu, "clocks", [("graphics_clock", "1980 MHz"), ("sm_clock", "1980 MHz")])


def _throttle(gpu: ET.Element, host: HostConfig) -> None:
    active = set(host.gpu_health.throttle_reasons)
    reasons = [
        ("clocks_event_reason_" + name, "Active" if name in active else "Not Active")
        for name in THROTTLE_REASONS
    ]
    _subtree(gpu, "clocks_event_reasons", reasons)


def _processes(gpu: ET.Element, host: HostConfig, index: int) -> None:
    processes = _sub(gpu, "processes")
    for process in host.gpu_health.foreign_processes:
        if process.gpu != index:
            continue
        info = [("gpu_instance_id", "N/A"), ("compute_instance_id", "N/A")]
        info += [("pid", str(process.pid)), ("type", "C"), ("process_name", process.name)]
        info += [("used_memory", "{} MiB".format(process.used_memory_mib))]
        _subtree(processes, "process_info", info)


def _nvidia_gpu(root: ET.Element, host: HostConfig, index: int, live: GpuLive) -> None:
    gpu = _sub(root, "gpu")
    gpu.set("id", bus_id(index)[0])
    _identity(gpu, host, index)
    _load(gpu, host, live)
    _throttle(gpu, host)
    _processes(gpu, host, index)


def render_nvidia_xml(host: HostConfig, live: Sequence[GpuLive], now: datetime) -> str:
    require_vendor(host, "nvidia", "nvidia-smi")
    root = ET.Element("nvidia_smi_log")
    _sub(root, "timestamp", now.strftime("%a %b %d %H:%M:%S %Y"))
    _sub(root, "driver_version", host.driver_version)
    _sub(root, "cuda_version", host.cuda_version or "N/A")
    _sub(root, "attached_gpus", str(host.gpu_count))
    for index, gpu_live in enumerate(live):
        _nvidia_gpu(root, host, index, gpu_live)
    ET.indent(root, space="    ")
    header = '<?xml version="1.0" encoding="UTF-8"?>\n'
    doctype = '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
    return header + doctype + ET.tostring(root, encoding="unicode") + "\n"


def csv_fields(
    host: HostConfig, index: int, live: GpuLive, now: datetime
) -> Dict[str, Tuple[str, str]]:
    """field -> (value, unit or ''); the unit is dropped with `nounits`."""
    model = nvidia_model(host.gpu_model)
    total = host.gpu_memory_mib
    reserved, used, free = _memory(total, live.memory_used_mib)
    return {
        "timestamp": (
            now.strftime("%Y/%m/%d %H:%M:%S.") + "{:03d}".format(now.microsecond // 1000),
            "",
        ),
        "driver_version": (host.driver_version, ""),
        "count": (str(host.gpu_count), ""),
        "name": (host.gpu_model, ""),
        "serial": ("{:013d}".format(1652022000000 + index), ""),
        "uuid": ("GPU-" + gpu_uuid(host, index), ""),
        "pci.bus_id": (bus_id(index)[0], ""),
        "index": (str(index), ""),
        "persistence_mode": ("Enabled", ""),
        "pstate": ("P0", ""),
        "memory.total": (str(total), "MiB"),
        "memory.reserved": (str(reserved), "MiB"),
        "memory.used": (str(used), "MiB"),
        "memory.free": (str(free), "MiB"),
        "compute_cap": (model.compute_cap, ""),
        "utilization.gpu": (str(round(live.utilization_pct)), "%"),
        "utilization.memory": (str(round(live.utilization_pct) // 2), "%"),
        "temperature.gpu": (str(temperature(live)), ""),
        "power.draw": ("{:.2f}".format(power_draw(model, live)), "W"),
        "power.limit": ("{:.2f}".format(model.power_limit_w), "W"),
        "vbios_version": ("96.00.99.00.01", ""),
        "mig.mode.current": ("Disabled", ""),
    }


def render_nvidia_csv(
    host: HostConfig,
    live: Sequence[GpuLive],
    now: datetime,
    query: str = DEFAULT_QUERY,
    options: Sequence[str] = (),
) -> str:
    """`nvidia-smi --query-gpu=QUERY --format=csv[,noheader][,nounits]`."""
    require_vendor(host, "nvidia", "nvidia-smi")
    names = [name.strip() for name in query.split(",") if name.strip()]
    rows = [csv_fields(host, i, gpu_live, now) for i, gpu_live in enumerate(live)]
    for name in names:
        if name not in rows[0]:
            raise SmiQueryError('Field "{}" is not a valid field to query.'.format(name))
    lines = []
    if "noheader" not in options:
        units = [rows[0][n][1] for n in names]
        lines.append(", ".join(n + (" [{}]".format(u) if u else "") for n, u in zip(names, units)))  # noqa: B905
    for row in rows:
        cells = []
        for name in names:
            value, unit = row[name]
            cells.append(value if (not unit or "nounits" in options) else value + " " + unit)
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"
