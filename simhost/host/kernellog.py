"""`simhost dmesg`: the emulated host's kernel log in `dmesg --time-format iso` layout, with the
GPU driver's fault lines its config asks for: NVIDIA XIDs on an NVIDIA host, amdgpu RAS, reset
and fault lines on an AMD one.

Pure rendering; standard library only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import List, Tuple

from simhost.host.config import AmdgpuEvent, HostConfig
from simhost.host.inventory import bus_id

# amdgpu's own wording (drivers/gpu/drm/amd/amdgpu); RAS events carry "{event id}" where other
# lines carry "amdgpu: ", as the driver prints them.
AMDGPU_MESSAGES = {
    "ras_uncorrectable": "{1}socket: 0, die: 0, 2 new uncorrectable hardware errors detected "
    "in umc block",
    "ras_deferred": "{1}socket: 0, die: 0, 1 new deferred hardware errors detected in umc block",
    "ras_poison": "{1}poison is consumed by client 12, kick off gpu reset flow",
    "ras_fatal": "{1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
    "bad_pages": "amdgpu: Saved bad pages 130 reaches threshold value 128",
    "reset_failed": "amdgpu: GPU reset(1) failed",
    "gpu_reset": "amdgpu: GPU reset begin!",
    "ring_timeout": "amdgpu: ring gfx_0.0.0 timeout, signaled seq=1024, emitted seq=1026",
    "page_fault": "amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32770)",
}


def render_kernel_log(host: HostConfig, now: datetime) -> str:
    """A boot line and the host's GPU faults, each `seconds_ago` before `now`."""
    lines = [(now - timedelta(days=1), "Linux version 6.8.0-simhost (simhost test double)")]
    lines += _xid_lines(host, now) if host.gpu_vendor == "nvidia" else _amdgpu_lines(host, now)
    return "".join(
        "{} {}\n".format(moment.isoformat(timespec="microseconds").replace(".", ","), text)
        for moment, text in sorted(lines)
    )


def _xid_lines(host: HostConfig, now: datetime) -> List[Tuple[datetime, str]]:
    """As the NVIDIA driver logs them: "NVRM: Xid (PCI:0000:18:00): 79, pid=..., <message>"."""
    lines = []
    for event in host.gpu_health.xid_events:
        pci = "0000:{}:00".format(bus_id(event.gpu)[1].lower())
        text = "NVRM: Xid (PCI:{}): {}, pid='<unknown>', name=<unknown>, {}".format(
            pci, event.code, event.message
        )
        lines.append((now - timedelta(seconds=event.seconds_ago), text))
    return lines


def _amdgpu_lines(host: HostConfig, now: datetime) -> List[Tuple[datetime, str]]:
    """As amdgpu logs them: "amdgpu 0000:18:00.0: <message>", the address rocm-smi shows."""
    return [
        (now - timedelta(seconds=event.seconds_ago), amdgpu_line(event))
        for event in host.gpu_health.amdgpu_events
    ]


def amdgpu_line(event: AmdgpuEvent) -> str:
    pci = "0000:{}:00.0".format(bus_id(event.gpu)[1].lower())
    return "amdgpu {}: {}".format(pci, AMDGPU_MESSAGES[event.kind])
