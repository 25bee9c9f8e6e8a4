"""The accepted hosts as part of the contract: the inventory a G1 pass accepted, compared with
what a later run's probes see, and whether the host is fit to measure right now.

Pure: facts in (as runners.results.probe_facts gives them), plain words out. The services keep
the accepted inventory; a contract step in every G2/G3 plan compares before any server starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runners.adapters.amdgpu_log import AMDGPU_FAULTS
from runners.adapters.kernel_log import CRITICAL_XIDS
from runners.errors import ContractError, InfrastructureError

# Host memory is read from MemTotal, which a kernel update can move by a few MiB.
HOST_MEMORY_TOLERANCE = 0.01
# MiB a GPU may show in use before the run's first server starts (the host parameter
# gpu_memory_held_max_mib overrides it): the driver's context and a monitoring agent stay
# well under it; a model someone left loaded, in a container nvidia-smi cannot see into, does not.
GPU_MEMORY_HELD_MAX_MIB = 1024.0
# How a run the host check ended is recorded: the decision's engine, each clause's check prefix.
CONTRACT_CHECK_ENGINE = "tollgate contract check"
INVENTORY_CHECK = "inventory."


def inventory_of(facts: dict[str, Any]) -> dict[str, Any]:
    """What the contract pins of a host: GPUs, driver and toolkits, vLLM, the tier, memory."""
    gpus = (facts.get("gpu_inventory") or {}).get("gpus") or []
    inventory = facts.get("gpu_inventory") or {}
    tier = facts.get("offload_tier") or {}
    return {
        "gpu_count": len(gpus) if gpus else None,
        "gpu_models": sorted({gpu.get("name") or "" for gpu in gpus}) or None,
        "driver_version": inventory.get("driver_version"),
        "cuda_version": inventory.get("cuda_version"),
        "rocm_version": inventory.get("rocm_version") or facts.get("rocm_version"),
        "vllm_version": facts.get("vllm_version"),
        "offload_tier_present": tier.get("present"),
        "offload_tier_capacity_gib": tier.get("capacity_gib"),
        "host_memory_bytes": facts.get("host_memory_bytes"),
    }


def first_reported(probe_facts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The facts of the check's probes, in its order, merged: the first to report one wins."""
    facts: dict[str, Any] = {}
    for found in probe_facts:
        facts.update({k: v for k, v in found.items() if facts.get(k) is None})
    return facts


def inventory_differences(
    accepted: dict[str, Any], observed: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each field whose value changed since G1 accepted it; a field G1 never saw is skipped."""
    differences = []
    for name, expected in accepted.items():
        if expected is None:
            continue
        seen = observed.get(name)
        if not _same(name, expected, seen):
            differences.append({"field": name, "accepted": expected, "observed": seen})
    return differences


def difference_text(difference: dict[str, Any]) -> str:
    return (
        f"{difference['field']}: {difference['accepted']!r} accepted at G1, "
        f"{difference['observed']!r} now"
    )


def host_unfit(
    health: dict[str, Any] | None,
    *,
    held_max_mib: float | None = None,
    xid_events: list[dict[str, Any]] | None = None,
    since: float | None = None,
) -> list[str]:
    """Why the host cannot be measured now (someone else's job or memory on a GPU, a GPU
    slowing down, memory errors, an XID or amdgpu fault since `since`); empty when fit or when
    the tools report none of these. `health` is the gpu-health form of nvidia-smi or amd-smi
    (runners.adapters.gpu_health, amd_health). `held_max_mib` None skips the free-memory check
    (a server may run)."""
    problems = []
    tool = "amd-smi" if (health or {}).get("source") == "amd-smi-json" else "nvidia-smi"
    for gpu in (health or {}).get("gpus", []):
        where = f"GPU {gpu['index']}"
        for process in gpu.get("compute_processes", []):
            problems.append(
                f"{where}: foreign process {process.get('name')!r} (pid {process.get('pid')}) "
                f"holds {process.get('used_memory_mib')} MiB"
            )
        held = gpu.get("memory_used_mib")
        if not gpu.get("compute_processes") and _over(held, held_max_mib):
            problems.append(
                f"{where}: {held:.0f} MiB of GPU memory held before any server started "
                f"(tolerance {held_max_mib:.0f} MiB; no process visible to {tool})"
            )
        for reason in gpu.get("slowdown_reasons", []):
            problems.append(f"{where}: clocks held down ({reason})")
        if gpu.get("ecc_uncorrectable"):
            problems.append(f"{where}: {gpu['ecc_uncorrectable']} uncorrectable ECC error(s)")
    return problems + xid_faults(xid_events or [], health, since)


def xid_faults(
    events: list[dict[str, Any]], health: dict[str, Any] | None, since: float | None
) -> list[str]:
    """The critical GPU faults logged since `since` (the run's start), NVIDIA XIDs and amdgpu
    faults alike (runners.adapters.kernel_log), each with its GPU and what it was. A line
    without a readable time counts: nothing shows it predates the run."""
    gpus = _gpus_by_pci(health)
    return [
        f"{_gpu_of(event, gpus)}: {fault_name(event)} in the kernel log: {event['text'][:120]}"
        for event in events
        if event.get("critical")
        and (since is None or event.get("time") is None or event["time"] >= since)
    ]


def _gpu_of(event: dict[str, Any], gpus: dict[str, str]) -> str:
    pci = event.get("pci")
    if not pci:
        return "a GPU the log line does not name"
    return gpus.get(_pci_key(pci), f"GPU at PCI {pci}")


def fault_name(event: dict[str, Any]) -> str:
    """A kernel-log GPU event in words: `XID 79 (GPU has fallen off the bus)`, `XID 31` (a
    program's), `amdgpu uncorrectable ECC error (ras_uncorrectable)`, `amdgpu GPU page fault
    (page_fault)`."""
    # Events stored before amdgpu lines were read carry no vendor: they are all XIDs.
    if event.get("vendor", "nvidia") == "nvidia":
        code = event["code"]
        meaning = CRITICAL_XIDS.get(code, "critical XID" if event.get("critical") else None)
        return f"XID {code} ({meaning})" if meaning else f"XID {code}"
    kind = event.get("kind")
    meaning = AMDGPU_FAULTS[kind][0] if kind in AMDGPU_FAULTS else "GPU fault"
    return f"amdgpu {meaning} ({kind})"


def _gpus_by_pci(health: dict[str, Any] | None) -> dict[str, str]:
    return {
        _pci_key(gpu["pci_bus_id"]): f"GPU {gpu['index']}"
        for gpu in (health or {}).get("gpus", [])
        if gpu.get("pci_bus_id")
    }


def _pci_key(address: str) -> str:
    """Bus and device of a PCI address (the XID line: 0000:3b:00; nvidia-smi: 00000000:3B:00.0;
    amdgpu and amd-smi: 0000:c1:00.0)."""
    parts = address.lower().split(".")[0].split(":")
    return ":".join(parts[-2:])


def _over(value: object, limit: float | None) -> bool:
    return limit is not None and isinstance(value, (int, float)) and value > limit


def _same(name: str, expected: Any, seen: Any) -> bool:
    if name == "host_memory_bytes" and isinstance(seen, (int, float)):
        return bool(abs(seen - expected) <= HOST_MEMORY_TOLERANCE * expected)
    return bool(expected == seen)


def check_host(
    accepted: dict[str, Any] | None,
    facts: dict[str, Any],
    health: dict[str, Any] | None,
    *,
    step: str,
    held_max_mib: float = GPU_MEMORY_HELD_MAX_MIB,
    since: float | None = None,
) -> str:
    """Raise ContractError on an inventory change, InfrastructureError on an unfit host;
    otherwise say, for the run log, what was compared."""
    differences = inventory_differences(accepted, inventory_of(facts)) if accepted else []
    unread = [d["field"] for d in differences if d["observed"] is None]
    if unread:
        # A probe that failed or printed nothing readable says nothing about the product:
        # retry on a healthy host rather than call the contract broken.
        raise InfrastructureError(
            "could not re-read " + ", ".join(unread) + " on the host to compare with G1",
            step=step,
        )
    if differences:
        words = "; ".join(difference_text(d) for d in differences)
        raise ContractError(
            f"the host differs from the inventory G1 accepted: {words}",
            differences=differences,
            step=step,
        )
    problems = host_unfit(
        health, held_max_mib=held_max_mib, xid_events=facts.get("xid_events"), since=since
    )
    if problems:
        raise InfrastructureError(
            "the host is not fit to measure: " + "; ".join(problems), permanent=True, step=step
        )
    compared = sum(value is not None for value in (accepted or {}).values())
    if not accepted:
        return "no inventory accepted at G1 to compare with; host fit to measure\n"
    return f"host matches the {compared} accepted inventory fields; fit to measure\n"
