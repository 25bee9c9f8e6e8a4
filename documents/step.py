"""A run step: one entry of a gate program's plan, as runners.program.sequence builds it, the
task layer stores it (RunStep.detail["step"], JSON) and runners.program.perform reads it back.
Standard library only.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

# What a step does; runners.program.perform.EXECUTORS has one executor for each but "upload"
# (the step an uploaded result is recorded under, never performed on a host).
StepKind = Literal[
    "prepare",
    "probe",
    "contract",
    "serve",
    "stop",
    "offload_server",
    "bench",
    "warmup",
    "complete",
    "soak",
    "replay",
    "upload",
]

# Why a bench runs: G2's offload-hit check, G2's A/A noise floor, or a G3 cell.
BenchPurpose = Literal["hit", "aa", "g3"]


class Step(TypedDict, total=False):
    """Every step has a name (unique in its run: the recorded row is found by it) and a kind;
    the other keys belong to the kinds noted beside them."""

    name: Required[str]
    kind: Required[StepKind]
    probe: str  # probe: the profile's probe to run
    probes: list[str]  # contract: the probes the host is re-read with
    arm: str  # complete, serve, stop, offload_server, bench, warmup: the arm (role) measured
    arm_kind: str  # serve, stop, offload_server, bench, warmup: one of the spec's arm kinds
    session: str  # serve, stop, offload_server: the server session's label
    purpose: BenchPurpose  # bench
    tier: int  # bench: the concurrency tier
    repetition: int  # bench
    seed: int  # bench: the cell's own prompt seed
    workload: dict[str, Any]  # bench, warmup: a copy of the spec's workload
    replays: list[dict[str, Any]]  # replay: {workload, tier} of each trace replay to upload
    spec: dict[str, Any]  # soak: the whole G4 spec the agent is configured from
