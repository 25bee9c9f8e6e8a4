"""What each engine reads, gathered from a run's records as plain data: its steps' details (in
step order) and its normalized measurements. Pure: the server's evaluation and the offline
evidence verifier gather through these same functions, so both feed the engine alike.

A step is its stored detail ({"step": ..., "progress": ..., "facts": ...}); a measurement is
{"arm", "tier", "repetition", "metrics", "server", "raw_sha256"}.
"""

from __future__ import annotations

from collections.abc import Callable

from runners.program.sequence import AA_ARMS, HIT_ARM


def gather_g1(steps: list[dict]) -> dict:
    """Every probe's facts, the first observed value of each winning."""
    facts: dict = {}
    for name, value in _all_facts(steps):
        if value is not None and facts.get(name) is None:
            facts[name] = value
    inventory = facts.get("gpu_inventory")
    # rocm-smi/amd-smi JSON carries no ROCm version; a separate probe reads it.
    if inventory and not inventory.get("rocm_version") and facts.get("rocm_version"):
        facts["gpu_inventory"] = {**inventory, "rocm_version": facts["rocm_version"]}
    facts.pop("rocm_version", None)
    return facts


def gather_g2(spec: dict, steps: list[dict], measurements: list[dict]) -> dict:
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


def gather_g3(measurements: list[dict]) -> list[dict]:
    keys = ("arm", "tier", "repetition", "metrics", "server", "raw_sha256")
    return [{key: m.get(key) for key in keys} for m in _in_cell_order(measurements)]


def gather_evidence(spec: dict, steps: list[dict], measurements: list[dict]) -> object:
    """The evidence the engine of `spec`'s gate kind reads; KeyError for a kind without one
    (G4's soak windows come with its own program)."""
    return GATHER[spec["gate"]](spec, steps, measurements)


GATHER: dict[str, Callable[[dict, list[dict], list[dict]], object]] = {
    "G1": lambda spec, steps, measurements: gather_g1(steps),
    "G2": gather_g2,
    "G3": lambda spec, steps, measurements: gather_g3(measurements),
}


def _in_cell_order(measurements: list[dict]) -> list[dict]:
    return sorted(measurements, key=lambda m: (m["repetition"], m["tier"], m["arm"]))


def _all_facts(steps: list[dict]) -> list[tuple[str, object]]:
    return [(name, value) for detail in steps for name, value in detail.get("facts", {}).items()]


def _offload_healthy_after(steps: list[dict], facts: dict) -> float | None:
    for detail in steps:
        step = detail.get("step", {})
        if step.get("kind") == "serve" and step.get("arm_kind") == "offload":
            return detail.get("progress", {}).get("healthy_after_s")
    return facts.get("offload_healthy_after_s")


def _aa_pairs(measurements: list[dict]) -> list[dict]:
    a, b = AA_ARMS
    rows = {(m["arm"], m["repetition"]): m["metrics"] for m in measurements if m["arm"] in AA_ARMS}
    repetitions = sorted({r for _, r in rows})
    return [
        {"repetition": r, "a": rows[(a, r)], "b": rows[(b, r)]}
        for r in repetitions
        if (a, r) in rows and (b, r) in rows
    ]
