"""Shared pieces of the emulated GPU inventory: live figures, the model catalogue, and the
identifiers (UUIDs, PCI bus ids) every smi format derives from the host config.

Pure; standard library only.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Tuple

from simhost.host.config import HostConfig

MIB = 1 << 20


class SmiUnavailableError(RuntimeError):
    """The asked-for tool does not exist on this emulated host (wrong GPU vendor)."""


class SmiQueryError(ValueError):
    """A --query-gpu field nvidia-smi would refuse."""


@dataclass(frozen=True)
class GpuLive:
    """Live figures of one GPU, from the running servers' state files."""

    memory_used_mib: float
    utilization_pct: float


@dataclass(frozen=True)
class GpuModel:
    brand: str
    architecture: str
    power_limit_w: float
    idle_power_w: float
    compute_cap: str
    device_id: str


_NVIDIA_MODELS = {
    "H100": GpuModel("NVIDIA", "Hopper", 700.0, 72.0, "9.0", "0x233010DE"),
    "H200": GpuModel("NVIDIA", "Hopper", 700.0, 77.7, "9.0", "0x233510DE"),
    "A100": GpuModel("NVIDIA", "Ampere", 400.0, 58.0, "8.0", "0x20B210DE"),
}
_GENERIC_NVIDIA = GpuModel("NVIDIA", "Hopper", 700.0, 70.0, "9.0", "0x233010DE")
# PCI device ids from pci.ids (Aqua Vanjaram 74a1 = MI300X, 74a2 = MI308X); 750 W is the
# MI300X OAM's board power (AMD datasheet), kept for the MI308X, whose limit is not published.
_AMD_MODELS = {
    "MI308X": GpuModel("AMD", "gfx942", 750.0, 140.0, "gfx942", "0x74a2"),
    "MI300X": GpuModel("AMD", "gfx942", 750.0, 140.0, "gfx942", "0x74a1"),
}


def nvidia_model(name: str) -> GpuModel:
    for key, model in _NVIDIA_MODELS.items():
        if key in name:
            return model
    return _GENERIC_NVIDIA


def amd_model(name: str) -> GpuModel:
    """The AMD GPU a host config names; the MI300X when unknown."""
    for key, model in _AMD_MODELS.items():
        if key in name.upper():
            return model
    return _AMD_MODELS["MI300X"]


def gpu_uuid(host: HostConfig, index: int) -> str:
    digest = hashlib.md5("{}/{}".format(host.hostname, index).encode()).digest()  # noqa: S324
    return str(uuid.UUID(bytes=digest))


def bus_id(index: int) -> Tuple[str, str]:
    """(nvidia-style 8-digit domain bus id, bus number) for GPU `index`."""
    bus = "{:02X}".format(0x18 + 0x10 * index)
    return "00000000:{}:00.0".format(bus), bus


def power_draw(model: GpuModel, live: GpuLive) -> float:
    return (
        model.idle_power_w + (model.power_limit_w - model.idle_power_w) * live.utilization_pct / 100
    )


def temperature(live: GpuLive) -> int:
    return int(30 + live.utilization_pct * 0.45)


def require_vendor(host: HostConfig, vendor: str, tool: str) -> None:
    if host.gpu_vendor != vendor:
        raise SmiUnavailableError(
            "{}: command not found (the emulated host has {} GPUs)".format(tool, host.gpu_vendor)
        )
