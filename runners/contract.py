"""The accepted hosts as part of the contract: the inventory a G1 pass accepted, compared with
what a later run's probes see, and whether the host is fit to measure right now.

Pure: facts in (as runners.results.probe_facts gives them), plain words out. The services keep
the accepted inventory; a contract step in every G2/G3 plan compares before any server starts.
"""

from __future__ import annotations

from typing import Any

from runners.errors import ContractError, InfrastructureError

# Host memory is read from MemTotal, which a kernel update can move by a few MiB.
HOST_MEMORY_TOLERANCE = 0.01


def inventory_of(facts: dict) -> dict[str, Any]:
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


def inventory_differences(accepted: dict, observed: dict) -> list[dict[str, Any]]:
    """Each field whose value changed since G1 accepted it; a field G1 never saw is skipped."""
    differences = []
    for name, expected in accepted.items():
        if expected is None:
            continue
        seen = observed.get(name)
        if not _same(name, expected, seen):
            differences.append({"field": name, "accepted": expected, "observed": seen})
    return differences


def difference_text(difference: dict) -> str:
    return (
        f"{difference['field']}: {difference['accepted']!r} accepted at G1, "
        f"{difference['observed']!r} now"
    )


def host_unfit(health: dict | None) -> list[str]:
    """Why the host cannot be measured now (someone else's job on a GPU, a GPU slowing down,
    memory errors); empty when fit or when the smi tool reports none of these."""
    problems = []
    for gpu in (health or {}).get("gpus", []):
        where = f"GPU {gpu['index']}"
        for process in gpu.get("compute_processes", []):
            problems.append(
                f"{where}: foreign process {process.get('name')!r} (pid {process.get('pid')}) "
                f"holds {process.get('used_memory_mib')} MiB"
            )
        for reason in gpu.get("slowdown_reasons", []):
            problems.append(f"{where}: clocks held down ({reason})")
        if gpu.get("ecc_uncorrectable"):
            problems.append(f"{where}: {gpu['ecc_uncorrectable']} uncorrectable ECC error(s)")
    return problems


def _same(name: str, expected: Any, seen: Any) -> bool:
    if name == "host_memory_bytes" and isinstance(seen, (int, float)):
        return abs(seen - expected) <= HOST_MEMORY_TOLERANCE * expected
    return expected == seen


def check_host(accepted: dict | None, facts: dict, health: dict | None, *, step: str) -> str:
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
    problems = host_unfit(health)
    if problems:
        raise InfrastructureError(
            "the host is not fit to measure: " + "; ".join(problems), permanent=True, step=step
        )
    compared = sum(value is not None for value in (accepted or {}).values())
    if not accepted:
        return "no inventory accepted at G1 to compare with; host fit to measure\n"
    return f"host matches the {compared} accepted inventory fields; fit to measure\n"
