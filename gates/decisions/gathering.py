"""What each engine reads, gathered from a run's records as plain data: its steps' details (in
step order) and its normalized measurements. Pure: the server's evaluation and the offline
evidence verifier gather through these same functions, so both feed the engine alike.

A step is its stored detail ({"step": ..., "progress": ..., "facts": ...}); a measurement is
{"arm", "tier", "repetition", "metrics", "server", "raw_sha256"}.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runners.program.sequence import AA_ARMS, HIT_ARM

# A step's stored detail and a normalized measurement, as stored: free-form JSON here.
Detail = dict[str, Any]
Record = dict[str, Any]


def gather_g1(steps: list[Detail]) -> dict[str, Any]:
    """Every probe's facts, the first observed value of each winning."""
    facts: dict[str, Any] = {}
    for name, value in _all_facts(steps):
        if value is not None and facts.get(name) is None:
            facts[name] = value
    inventory = facts.get("gpu_inventory")
    # rocm-smi/amd-smi JSON carries no ROCm version; a separate probe reads it.
    if inventory and not inventory.get("rocm_version") and facts.get("rocm_version"):
        facts["gpu_inventory"] = {**inventory, "rocm_version": facts["rocm_version"]}
    facts.pop("rocm_version", None)
    return facts


def gather_g2(
    spec: Mapping[str, Any], steps: list[Detail], measurements: list[Record]
) -> dict[str, Any]:
    facts = dict(_all_facts(steps))
    reference = facts.get("answers_resident", [])
    offload = facts.get("answers_offload", [])
    healthy_after = _offload_healthy_after(steps, facts)
    hit = next((m for m in _in_cell_order(measurements) if m["arm"] == HIT_ARM), None)
    prompts = spec["equivalence"]["prompts"]
    return {
        "health": {"healthy": healthy_after is not None, "seconds": healthy_after},
        "equivalence": [
            {
                "prompt": i,
                "reference": reference[i] if i < len(reference) else None,
                "offload": offload[i] if i < len(offload) else None,
            }
            for i in range(len(prompts))
        ],
        "external_hit_rate": (hit["server"] or {}).get("external_hit_rate") if hit else None,
        "aa_pairs": _aa_pairs(measurements),
    }


def gather_g3(measurements: list[Record]) -> list[Record]:
    keys = ("arm", "tier", "repetition", "metrics", "server", "raw_sha256")
    return [{key: m.get(key) for key in keys} for m in _in_cell_order(measurements)]


def gather_evidence(
    spec: Mapping[str, Any], steps: list[Detail], measurements: list[Record]
) -> object:
    """The evidence the engine of `spec`'s gate kind reads; KeyError for a kind without one
    (G4's soak windows come with its own program)."""
    return GATHER[spec["gate"]](spec, steps, measurements)


GATHER: dict[str, Callable[[Mapping[str, Any], list[Detail], list[Record]], object]] = {
    "G1": lambda spec, steps, measurements: gather_g1(steps),
    "G2": gather_g2,
    "G3": lambda spec, steps, measurements: gather_g3(measurements),
}


def _in_cell_order(measurements: list[Record]) -> list[Record]:
    return sorted(measurements, key=lambda m: (m["repetition"], m["tier"], m["arm"]))


def _all_facts(steps: list[Detail]) -> list[tuple[str, Any]]:
    return [(name, value) for detail in steps for name, value in detail.get("facts", {}).items()]


def _offload_healthy_after(steps: list[Detail], facts: dict[str, Any]) -> float | None:
    for detail in steps:
        step = detail.get("step", {})
        if step.get("kind") == "serve" and step.get("arm_kind") == "offload":
            after: float | None = detail.get("progress", {}).get("healthy_after_s")
            return after
    fallback: float | None = facts.get("offload_healthy_after_s")
    return fallback


def _aa_pairs(measurements: list[Record]) -> list[dict[str, Any]]:
    a, b = AA_ARMS
    rows = {(m["arm"], m["repetition"]): m["metrics"] for m in measurements if m["arm"] in AA_ARMS}
    repetitions = sorted({r for _, r in rows})
    return [
        {"repetition": r, "a": rows[(a, r)], "b": rows[(b, r)]}
        for r in repetitions
        if (a, r) in rows and (b, r) in rows
    ]
