"""A G3 gate's attempts: how many have spent its error budget, refusing one beyond the spec's
cap (or, when the spec requires it, one its operating characteristic says cannot reach the
wanted power), and what the engine needs to know (which attempt, the G2 noise floor).

The spec splits its error budget across `statistics.attempts` (docs/decisions.md), so an
attempt that reached a clause verdict (pass, fail or inconclusive) spends its share whatever
the spec version; invalid and infra_error attempts tested nothing and spend none. A rehearsal
(a run on a version not yet signed by both parties) counts for nothing, so it spends nothing:
its data never feeds a counted verdict. A signed stop-loss reset starts the count again.
"""

from __future__ import annotations

from gates.errors import ServiceError
from gates.models import Gate, Verdict
from gates.selectors import (
    engagement_noise_floor,
    gate_counted_decisions,
    gate_operating_characteristic,
)

SPENDING = (Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE)


class AttemptsSpentError(ServiceError):
    """The spec's attempts are spent: another run could only pass by luck."""

    code = "attempts_spent"
    status = 409


def gate_attempts_spent(gate: Gate) -> int:
    """Counted engine decisions of this gate (no rehearsals, none before a reset) that reached
    a clause verdict."""
    return gate_counted_decisions(gate).filter(verdict__in=SPENDING).count()


def gate_attempts_allowed(document: dict) -> int | None:
    """The spec's cap on attempts; None where it states none (a spec written before it)."""
    if document.get("gate") != "G3":
        return None
    return (document.get("statistics") or {}).get("attempts")


def gate_check_attempts_left(gate: Gate) -> None:
    allowed = gate_attempts_allowed(gate.current_spec.document)
    spent = gate_attempts_spent(gate)
    if allowed is not None and spent >= allowed:
        raise AttemptsSpentError(
            f"{gate.kind} has used {spent} of the {allowed} attempts its spec allows: the error "
            "budget is spent (a vendor admin may stop the engagement or waive the gate)",
            field="statistics.attempts",
        )


class UnderpoweredSpecError(ServiceError):
    """The spec requires power at its claims that it cannot reach at the measured noise."""

    code = "underpowered"
    status = 409


def gate_check_power(gate: Gate) -> None:
    """With `statistics.require_power`, refuse an attempt whose gate would pass less often than
    `min_power` with every clause at its claimed effect (the operating characteristic)."""
    rules = gate.current_spec.document.get("statistics") or {}
    if gate.kind != Gate.Kind.G3 or not rules.get("require_power"):
        return
    found = gate_operating_characteristic(gate)
    if not found or not found["available"]:
        raise UnderpoweredSpecError(
            "the spec requires power but no noise is known (run G2 or state noise_cv_pct)",
            field="statistics.require_power",
        )
    power, wanted = found["gate"]["at_claims"]["pass"], found["min_power"]
    if power < wanted:
        raise UnderpoweredSpecError(
            f"at the measured noise the gate passes {power:.0%} of the time with every clause at "
            f"its claimed effect; the spec requires {wanted:.0%}",
            field="statistics.require_power",
        )


def gate_attempts_exhausted(gate: Gate, document: dict) -> bool:
    """No attempt left and none passed: the gate goes to stop-loss review like a spent fail."""
    allowed = gate_attempts_allowed(document)
    return allowed is not None and gate_attempts_spent(gate) >= allowed


def g3_decision_context(gate: Gate) -> dict:
    """Which attempt this is, and the engagement's G2 A/A noise (the floor under G3's sd)."""
    return {
        "attempt": gate_attempts_spent(gate) + 1,
        "noise_floor": engagement_noise_floor(gate.engagement),
    }
