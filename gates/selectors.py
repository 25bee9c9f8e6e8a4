"""Reads that pages and the API share: a gate's clause rows and its latest engine decision.
Reads models only; writes nothing (writers are in gates.services).
"""

from __future__ import annotations

from gates.models import Decision, Gate, GateSpec
from gates.specdiff import FieldChange, spec_changes


def gate_latest_decision(gate: Gate) -> Decision | None:
    """The gate's newest decision made by the engine (not a waiver or a stop)."""
    return gate.decisions.filter(kind=Decision.Kind.ENGINE).first()


def gate_clauses(gate: Gate) -> list[dict]:
    """The rows of the gate's latest engine decision in the API's shape.

    G3 rows are clause x tier cells; G1/G2 rows are checks, named by `metric` too.
    """
    decision = gate_latest_decision(gate)
    if decision is None:
        return []
    return [_clause_row(clause) for clause in decision.clauses]


def _clause_row(clause: dict) -> dict:
    numbers = {key: clause.get(key) for key in ("estimate", "low", "high")}
    threshold = clause.get("threshold", clause.get("expected"))
    return {
        "metric": clause.get("metric") or clause.get("check"),
        "tiers": clause.get("tiers", clause.get("tier")),
        "threshold": threshold if isinstance(threshold, (int, float)) else None,
        **numbers,
        "verdict": clause.get("verdict"),
        "cause": clause.get("cause"),
    }


def gate_spec_in_force(gate: Gate) -> GateSpec | None:
    """The newest version both parties signed: the bar counted decisions are held to."""
    for spec in gate.specs.order_by("-version").prefetch_related("signatures"):
        if spec.in_force:
            return spec
    return None


def gate_spec_proposed(gate: Gate) -> GateSpec | None:
    """The latest version when it is newer than the one in force (or none is in force yet)."""
    latest = gate.current_spec
    if latest is None or latest.in_force:
        return None
    return latest


def spec_changes_from_force(gate: Gate, spec: GateSpec) -> list[FieldChange]:
    """How `spec` differs from the version in force, field by field (empty if none is)."""
    in_force = gate_spec_in_force(gate)
    if in_force is None or in_force.pk == spec.pk:
        return []
    return spec_changes(in_force.document, spec.document)


def gate_counted_decisions(gate: Gate):
    """Engine decisions that count: not rehearsals, and after the last stop-loss reset."""
    counted = gate.decisions.filter(kind=Decision.Kind.ENGINE, rehearsal=False)
    reset = gate.resets.filter(effective_at__isnull=False).order_by("-effective_at").first()
    if reset is not None:
        counted = counted.filter(created_at__gt=reset.effective_at)
    return counted
