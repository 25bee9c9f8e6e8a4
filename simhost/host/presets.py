"""The named host presets: the emulated hosts `--host-preset NAME` picks, as host config JSON
(simhost.host.config validates them like any file).

Pure data; imports only the standard library and simhost's GPU figures (simhost.engine.presets).
"""

from __future__ import annotations

from typing import Any, Dict

from simhost.engine.presets import GPUS

DEFAULT_HOST_PRESET = "h100x8-cpu512"
GIB = float(1 << 30)
# Inventory figures are as the real tools print them; each GPU's performance figures (FLOPs,
# HBM, host link) live once, in simhost.engine.presets.GPUS, found by the model string below.
_NVIDIA_H100 = {
    "name": "h100x8-cpu512",
    "hostname": "simhost-h100",
    # nvidia-smi's name and total for the H100 SXM5 80 GB; driver 550.54.15 is the R550 release
    # that ships CUDA 12.4; 2 TB of host DRAM as the DGX H100 datasheet. The 512 GiB tier at
    # 100 GiB/s is a choice (the demo's figures were measured with it), not a published figure.
    "gpu": {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "count": 8, "memory_mib": 81559},
    "driver_version": "550.54.15",
    "cuda_version": "12.4",
    "rocm_version": None,
    "vllm_version": "0.20.1",
    "host_memory_gib": 2048.0,
    "offload_tier": {
        "present": True,
        "kind": "cpu-dram",
        "capacity_gib": 512.0,
        "bandwidth_gib_s": 100.0,
    },
}

_AMD_MI300X = {
    "name": "mi300x8-rocm",
    "hostname": "simhost-mi300x",
    # 192 GB HBM3 (AMD MI300X datasheet) as rocm-smi's total; the 3 TiB of host DRAM and the
    # tier are choices, not published figures.
    "gpu": {"vendor": "amd", "model": "AMD Instinct MI300X", "count": 8, "memory_mib": 196288},
    "driver_version": "6.8.5",
    "cuda_version": None,
    "rocm_version": "6.3.1",
    "vllm_version": "0.20.1",
    "host_memory_gib": 3072.0,
    "offload_tier": {
        "present": True,
        "kind": "cpu-dram",
        "capacity_gib": 512.0,
        "bandwidth_gib_s": 100.0,
    },
}


def _links_gib_s(gpu_name: str, count: int) -> float:
    """A host side that keeps up with the GPUs' host links (an estimate: no vendor publishes
    the DRAM-to-8-GPU DMA rate): `count` times the link speed GPUS gives, in GiB/s."""
    return round(count * GPUS[gpu_name].link_bytes_per_s / GIB, 1)


_NVIDIA_H200 = {
    "name": "h200x8-cpu1024",
    "hostname": "simhost-h200",
    # As nvidia-smi 590.48.01 prints a real H200 SXM (141 GB HBM3e): name, 143771 MiB, driver
    # and CUDA (tests/simhost/fixtures/nvidia_gpu_exporter__capture__linux-x86_64__nvidia-h200*).
    # FLOPs and the 4.8 TB/s HBM3e: GPUS["H200-SXM-141GB"] (NVIDIA H200 datasheet).
    "gpu": {"vendor": "nvidia", "model": "NVIDIA H200", "count": 8, "memory_mib": 143771},
    "driver_version": "590.48.01",
    "cuda_version": "13.1",
    "rocm_version": None,
    "vllm_version": "0.20.1",
    "host_memory_gib": 2048.0,  # NVIDIA DGX H200 datasheet: 2 TB system memory
    "offload_tier": {
        "present": True,
        "kind": "cpu-dram",
        "capacity_gib": 1024.0,  # a choice: half the host's DRAM, not a published figure
        "bandwidth_gib_s": _links_gib_s("H200-SXM-141GB", 8),
    },
}

_AMD_MI308X = dict(
    _AMD_MI300X,
    name="mi308x8-rocm",
    hostname="simhost-mi308x",
    # No public datasheet: press reports give the MI308X the MI300X's 192 GB of HBM3 (so
    # rocm-smi's MI300X total is kept: an estimate) on 80 of its 304 compute units; its
    # FLOPs and HBM bandwidth are GPUS["MI308X"]'s. Driver, ROCm and host as mi300x8-rocm.
    gpu={"vendor": "amd", "model": "AMD Instinct MI308X", "count": 8, "memory_mib": 196288},
    offload_tier={
        "present": True,
        "kind": "cpu-dram",
        "capacity_gib": 512.0,
        "bandwidth_gib_s": _links_gib_s("MI308X", 8),
    },
)

HOST_PRESETS: Dict[str, Dict[str, Any]] = {
    "h100x8-cpu512": _NVIDIA_H100,
    "h200x8-cpu1024": _NVIDIA_H200,
    "mi300x8-rocm": _AMD_MI300X,
    "mi308x8-rocm": _AMD_MI308X,
    "h100x8-no-tier": dict(
        _NVIDIA_H100,
        name="h100x8-no-tier",
        hostname="simhost-h100-notier",
        offload_tier={
            "present": False,
            "kind": None,
            "capacity_gib": None,
            "bandwidth_gib_s": None,
        },
    ),
}
