"""The operating characteristic of a G3 spec (gates.decisions.statistics.operating): what it
can decide at a given noise, per clause and for the gate. Shown before a spec is signed and
stored with each G3 decision. Standard library only.
"""

# No `from __future__ import annotations`: Python 3.11 reads NotRequired from evaluated
# annotations only, and __required_keys__ must be right for code that inspects these types.

from typing import Literal, NotRequired, TypedDict

from documents.spec import CellChange

# "pass" is a Python keyword, so the TypedDicts that hold it are spelt in the functional form.
# half_width_95: each simulated probability's Wilson 95 % half-width (its sampling error).
HalfWidths = TypedDict("HalfWidths", {"pass": float, "fail": float, "inconclusive": float})
SimulatedOutcome = TypedDict(
    "SimulatedOutcome",
    {
        "pass": float,
        "fail": float,
        "inconclusive": float,
        "repetitions": float,
        "half_width_95": HalfWidths,
    },
)
# One true effect of a clause (in clause units); claimed: it is the vendor's claimed effect.
EffectRow = TypedDict(
    "EffectRow",
    {
        "true": float,
        "claimed": bool,
        "pass": float,
        "fail": float,
        "inconclusive": float,
        "repetitions": float,
        "half_width_95": HalfWidths,
    },
)
AtClaims = TypedDict(
    "AtClaims",
    {
        "pass": float,
        "fail": float,
        "inconclusive": float,
        "repetitions": float,
        "half_width_95": HalfWidths,
        "host_hours": float | None,
    },
)
LifetimeWidths = TypedDict("LifetimeWidths", {"pass": float, "fail": float})
# The whole engagement at this gate under one team policy (gates.decisions.statistics.budget).
LifetimeRow = TypedDict(
    "LifetimeRow",
    {
        "scenario": str,
        "policy": str,
        "policy_text": str,
        "pass": float,
        "fail": float,
        "attempts": float,
        "half_width_95": LifetimeWidths,
        "declared": float,
    },
)


class ClauseCharacteristic(TypedDict):
    clause: int
    metric: str
    compare: str
    change: CellChange
    tiers: list[int]
    threshold: float
    claimed: float | None
    rows: list[EffectRow]
    power_at_claim: float | None


class GateCharacteristic(TypedDict):
    """Every cell at its clause's claimed effect, and every cell at its bar."""

    at_claims: AtClaims
    at_bars: SimulatedOutcome
    lifetime: NotRequired[list[LifetimeRow]]


class NoiseUsed(TypedDict):
    sd_log_ratio: float
    source: str


class LooksUsed(TypedDict):
    looks: list[int]
    attempts: int
    cells: int


class OperatingCharacteristic(TypedDict):
    available: Literal[True]
    noise: NoiseUsed
    plan: LooksUsed
    simulated_gates: int
    min_power: float
    clauses: list[ClauseCharacteristic]
    gate: GateCharacteristic
    warnings: list[str]


class NoCharacteristic(TypedDict):
    """No noise is known (no G2 A/A run, no stated CV): nothing to simulate with."""

    available: Literal[False]
    reason: str


class ErrorBudget(TypedDict):
    """Where a gate's engagement-wide error budget stands (one-sided, per side)."""

    per_side: float
    share_per_attempt: float
    attempts_allowed: int
    attempts_spent: int
    attempts_left: int
    error_spent: float
    lifetime_error: float
    next_attempt: int | None


class ResetCost(TypedDict):
    """What one more signed stop-loss reset adds to the lifetime error (one side)."""

    adds_per_side: float
    lifetime_before: float
    lifetime_after: float
    attempts_added: int


class Proposal(TypedDict):
    """One change that would make a spec decisive, and its cost where known."""

    kind: Literal["repetitions", "prompts", "cells", "bars"]
    text: str
    value: float
    host_hours: float | None


class SigningCheck(TypedDict):
    """Whether a spec may be signed at a noise without an acknowledgement of low power."""

    signable: bool
    power: float | None
    min_power: float | None
    reason: str
    proposals: list[Proposal]
