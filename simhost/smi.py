"""GPU inventory output in the layouts of nvidia-smi (-q -x XML, --query-gpu CSV), rocm-smi
--json and amd-smi metric --json: picks the renderer for a --format.

Pure rendering: host config and live usage in, text out. Standard library only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import List, Sequence

from simhost.amdsmi import render_amd_smi_json, render_rocm_json, render_rocm_version
from simhost.gpuinventory import GpuLive, SmiQueryError, SmiUnavailableError, bus_id
from simhost.hostconfig import HostConfig
from simhost.nvidiasmi import DEFAULT_QUERY, render_nvidia_csv, render_nvidia_xml

FORMATS = ("nvidia-xml", "nvidia-csv", "rocm-json", "amd-smi-json", "rocm-version")
__all__ = [
    "FORMATS",
    "GpuLive",
    "SmiQueryError",
    "SmiUnavailableError",
    "render",
    "render_kernel_log",
]


def render(
    fmt: str,
    host: HostConfig,
    live: List[GpuLive],
    now: datetime,
    query: str = DEFAULT_QUERY,
    options: Sequence[str] = (),
) -> str:
    if fmt == "nvidia-xml":
        return render_nvidia_xml(host, live, now)
    if fmt == "nvidia-csv":
        return render_nvidia_csv(host, live, now, query, options)
    if fmt == "rocm-json":
        return render_rocm_json(host, live)
    if fmt == "amd-smi-json":
        return render_amd_smi_json(host, live)
    if fmt == "rocm-version":
        return render_rocm_version(host)
    raise ValueError("--format: unknown {!r}".format(fmt))


def render_kernel_log(host: HostConfig, now: datetime) -> str:
    """`dmesg --time-format iso` with a boot line and the host's XID faults, as the NVIDIA
    driver logs them: "NVRM: Xid (PCI:0000:18:00): 79, pid=..., <message>"."""
    lines = [(now - timedelta(days=1), "Linux version 6.8.0-simhost (simhost test double)")]
    for event in host.gpu_health.xid_events:
        pci = "0000:{}:00".format(bus_id(event.gpu)[1].lower())
        text = "NVRM: Xid (PCI:{}): {}, pid='<unknown>', name=<unknown>, {}".format(
            pci, event.code, event.message
        )
        lines.append((now - timedelta(seconds=event.seconds_ago), text))
    return "".join(
        "{} {}\n".format(moment.isoformat(timespec="microseconds").replace(".", ","), text)
        for moment, text in sorted(lines)
    )
