"""The step plans of the G1-G4 programs: which steps a run performs, in which order.

Pure: a spec (and the profile's probe names) in, a list of JSON-able step dicts out. The task
layer stores the plan as RunStep rows; a G3 plan grows by whole repetitions when the decision
engine asks for more. PROGRAMS is the one answer to "can a gate of this kind be run": the
services refuse to start any other kind.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from documents.step import BenchPurpose, Step

# Measurement arm names of G2's own cells (G3 uses the spec's arm roles). Defined here only:
# gates.services.runs.evaluation reads G2's cells by these, so renaming one cannot split the sides.
AA_ARMS = ("aa_a", "aa_b")
HIT_ARM = "offload_hit"
WARMUP_PROMPTS = 4


def plan_run(spec: dict[str, Any], probe_names: list[str], *, first: int = 1) -> list[Step]:
    """The initial plan of a run of this spec; a G3 run's repetitions are numbered from `first`
    (after those it carries from an earlier attempt)."""
    if spec["gate"] == "G3":
        return with_contract_check(_plan_g3_start(spec, probe_names, first), probe_names)
    program = PROGRAMS.get(spec["gate"])
    if program is None:
        raise ValueError(f"no program for {spec['gate']}")
    return program(spec, probe_names)


def has_program(kind: str) -> bool:
    """Whether a run of this gate kind can be planned."""
    return kind in PROGRAMS


def _plan_g3_start(spec: dict[str, Any], probe_names: list[str], first: int = 1) -> list[Step]:
    prepare: Step = {"name": "prepare host", "kind": "prepare"}
    replays = [(spec["workload"], tier) for tier in spec["tiers"]]
    return [
        prepare,
        *_replay_steps(replays),
        *plan_g3_repetitions(spec, first=first, count=spec["repetitions"]["min"]),
    ]


def _replay_steps(cells: list[tuple[dict[str, Any], int]]) -> list[Step]:
    """Build and upload each trace replay the run sends, once, before any server starts: every
    arm and repetition of a tier then sends the same file (runners/program/replay.py)."""
    replays: list[dict[str, Any]] = []
    for workload, tier in cells:
        entry = {"workload": dict(workload), "tier": tier}
        if workload.get("trace") and entry not in replays:
            replays.append(entry)
    if not replays:
        return []
    return [{"name": "build and upload the trace replay", "kind": "replay", "replays": replays}]


def cell_workload(spec: dict[str, Any], arm: str) -> dict[str, Any] | None:
    """The workload a measurement cell of this spec sent: G2's hit cell its `offload_hit` one,
    its A/A cells the `noise_floor` one; G3's cells (and G4's load) the spec's own."""
    if spec.get("gate") == "G2":
        part = spec.get("offload_hit" if arm == HIT_ARM else "noise_floor") or {}
        return part.get("workload")
    return spec.get("workload")


def plan_g1(probe_names: list[str]) -> list[Step]:
    probes: list[Step] = [
        {"name": f"probe {name}", "kind": "probe", "probe": name} for name in probe_names
    ]
    return [{"name": "prepare host", "kind": "prepare"}, *probes]


def plan_g2(spec: dict[str, Any]) -> list[Step]:
    """Offload arm: equivalence answers and a reuse workload that must hit the offload tier;
    resident arm: reference answers; then A/A repetitions that measure the noise floor."""
    hit, noise = spec["offload_hit"], spec["noise_floor"]
    steps: list[Step] = [
        {"name": "prepare host", "kind": "prepare"},
        *_replay_steps([(hit["workload"], hit["tier"]), (noise["workload"], noise["tier"])]),
    ]
    steps += _session(
        "offload",
        "offload",
        "offload",
        [
            {"name": "offload: greedy answers", "kind": "complete", "arm": "offload"},
            _bench(HIT_ARM, "offload", hit["tier"], 1, hit["workload"], purpose="hit"),
        ],
    )
    steps += _session(
        "resident",
        "resident",
        "resident",
        [
            {"name": "resident: greedy answers", "kind": "complete", "arm": "resident"},
        ],
    )
    return steps + _aa_sessions(spec["noise_floor"])


def _aa_sessions(noise: dict[str, Any]) -> list[Step]:
    """Each A/A side in a server session of its own with the same prompts, exactly as G3
    compares arms: what differs between the sides is the noise G3 will have to beat."""
    steps: list[Step] = []
    for repetition in range(1, noise["repetitions"] + 1):
        order = AA_ARMS if repetition % 2 else tuple(reversed(AA_ARMS))
        for arm in order:
            bench = _bench(
                arm, "resident", noise["tier"], repetition, noise["workload"], purpose="aa"
            )
            steps += _session(f"aa r{repetition} {arm}", arm, "resident", [bench])
    return steps


def plan_g3_repetitions(spec: dict[str, Any], *, first: int, count: int) -> list[Step]:
    """Repetitions first..first+count-1: one server session per arm, arms interleaved
    A B C / C B A so slow drift hits every arm alike; tiers shuffled per session."""
    roles = list(spec["arms"])
    steps: list[Step] = []
    for repetition in range(first, first + count):
        order = roles if repetition % 2 else list(reversed(roles))
        for role in order:
            session = f"r{repetition}-{role}"
            tiers = shuffled_tiers(spec, repetition, role)
            benches = [
                _bench(role, spec["arms"][role], tier, repetition, spec["workload"], purpose="g3")
                for tier in tiers
            ]
            warmup: Step = {
                "name": f"{session}: warm-up",
                "kind": "warmup",
                "arm": role,
                "arm_kind": spec["arms"][role],
                "workload": spec["workload"],
            }
            # A trace replay warms up inside its own unmeasured window (workload.trace.warmup_s).
            warm = [] if spec["workload"].get("trace") else [warmup]
            steps += _session(session, role, spec["arms"][role], [*warm, *benches])
    return steps


def shuffled_tiers(spec: dict[str, Any], repetition: int, role: str) -> list[int]:
    """The session's tier order, reproducible from the spec's seed (recorded in the plan)."""
    tiers = list(spec["tiers"])
    # Not for security: a reproducible order from the recorded seed.
    random.Random(f"{spec['workload']['seed']}/{repetition}/{role}").shuffle(tiers)  # noqa: S311
    return tiers


def workload_seed(workload: dict[str, Any], repetition: int, tier: int) -> int:
    """Each cell gets its own prompts (no cache carry-over between cells); every arm of a
    repetition and tier gets the same prompts, so the pair compares like with like."""
    return int(workload["seed"]) + 1000 * repetition + tier


def _session(label: str, role: str, arm_kind: str, inner: list[Step]) -> list[Step]:
    # An offload session may need the tier's own server first (LMCache's); the step decides
    # from the profile whether there is one, so every offload plan has the same shape.
    tier_server: Step = {
        "name": f"{label}: start offload tier server",
        "kind": "offload_server",
        "arm": role,
        "arm_kind": arm_kind,
        "session": label,
    }
    return [
        *([tier_server] if arm_kind == "offload" else []),
        {
            "name": f"{label}: start {arm_kind} server",
            "kind": "serve",
            "arm": role,
            "arm_kind": arm_kind,
            "session": label,
        },
        *inner,
        {
            "name": f"{label}: stop server",
            "kind": "stop",
            "arm": role,
            "arm_kind": arm_kind,
            "session": label,
        },
    ]


def _bench(
    arm: str,
    arm_kind: str,
    tier: int,
    repetition: int,
    workload: dict[str, Any],
    *,
    purpose: BenchPurpose,
) -> Step:
    return {
        "name": f"{purpose} {arm} c={tier} r{repetition}",
        "kind": "bench",
        "purpose": purpose,
        "arm": arm,
        "arm_kind": arm_kind,
        "tier": tier,
        "repetition": repetition,
        "workload": dict(workload),
        "seed": workload_seed(workload, repetition, tier),
    }


def with_contract_check(steps: list[Step], probe_names: list[str]) -> list[Step]:
    """After preparing the host and before any server: re-probe it and hold it to the
    inventory G1 accepted (runners.contract). No probes, no check (an upload has none)."""
    if not probe_names:
        return steps
    check: Step = {
        "name": "check host against the accepted inventory",
        "kind": "contract",
        "probes": list(probe_names),
    }
    return [steps[0], check, *steps[1:]]


def plan_g4(spec: dict[str, Any]) -> list[Step]:
    """Launch the soak agent; from then on the collector's beat ticks watch the run, read its
    windows and decide (runners/soak/collector.py, gates/services/soak/ticks.py)."""
    return [
        {"name": "prepare host", "kind": "prepare"},
        {"name": "soak: launch agent", "kind": "soak", "spec": spec},
    ]


# Gate kind -> its initial plan, from the spec and the profile's probe names.
PROGRAMS: dict[str, Callable[[dict[str, Any], list[str]], list[Step]]] = {
    "G1": lambda spec, probe_names: plan_g1(probe_names),
    "G2": lambda spec, probe_names: with_contract_check(plan_g2(spec), probe_names),
    "G3": lambda spec, probe_names: with_contract_check(
        _plan_g3_start(spec, probe_names), probe_names
    ),
    "G4": lambda spec, probe_names: with_contract_check(plan_g4(spec), probe_names),
}
