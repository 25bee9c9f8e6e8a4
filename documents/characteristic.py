"""The operating characteristic of a G3 spec (gates.decisions.statistics.operating): what it
can decide at a given noise, per clause and for the gate. Shown before a spec is signed and
stored with each G3 decision. Standard library only.
"""

# No `from __future__ import annotations`: Python 3.11 reads NotRequired from evaluated
# annotations only, and __required_keys__ must be right for code that inspects these types.

from typing import Literal, TypedDict

from documents.spec import ChangeKind

# "pass" is a Python keyword, so the TypedDicts that hold it are spelt in the functional form.
SimulatedOutcome = TypedDict(
    "SimulatedOutcome",
    {"pass": float, "fail": float, "inconclusive": float, "repetitions": float},
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
    },
)
AtClaims = TypedDict(
    "AtClaims",
    {
        "pass": float,
        "fail": float,
        "inconclusive": float,
        "repetitions": float,
        "host_hours": float | None,
    },
)


class ClauseCharacteristic(TypedDict):
    clause: int
    metric: str
    compare: str
    change: ChangeKind
    tiers: list[int]
    threshold: float
    claimed: float | None
    rows: list[EffectRow]
    power_at_claim: float | None


class GateCharacteristic(TypedDict):
    """Every cell at its clause's claimed effect, and every cell at its bar."""

    at_claims: AtClaims
    at_bars: SimulatedOutcome


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
