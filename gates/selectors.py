"""Reads that pages and the API share: a gate's clause rows and its latest engine decision.
Reads models only; writes nothing (writers are in gates.services).
"""

from __future__ import annotations

from gates.models import Decision, Gate


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
        # G3 cells say what they compare and how, so a CI report can read "TTFT p50 reduction".
        "compare": clause.get("compare"),
        "change": clause.get("change"),
        "threshold": threshold if isinstance(threshold, (int, float)) else None,
        **numbers,
        "verdict": clause.get("verdict"),
        "cause": clause.get("cause"),
    }
