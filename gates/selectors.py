"""Reads that pages and the API share: a gate's clause rows and its latest engine decision.
Reads models only; writes nothing (writers are in gates.services).
"""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet, Subquery

from gates.models import Decision, Gate, GateSpec


def gate_latest_decision(gate: Gate) -> Decision | None:
    """The gate's newest decision made by the engine (not a waiver or a stop)."""
    return gate.decisions.filter(kind=Decision.Kind.ENGINE).first()


def gate_clauses(gate: Gate) -> list[dict]:
    """The rows of the gate's latest engine decision in the API's shape.

    G3 rows are clause x tier cells; G1/G2 rows are checks, named by `metric` too.
    """
    decision = gate_latest_decision(gate)
    return clause_rows(decision.clauses if decision is not None else [])


def gates_with_latest(queryset: QuerySet) -> QuerySet:
    """Gates annotated with `latest_spec_version` and `latest_engine_clauses`, in one query: a
    CI client polls a gate for hours (bench/api_speed.py; tests/gates/test_api_queries.py)."""
    specs = GateSpec.objects.filter(gate=OuterRef("pk")).order_by("-version")
    decisions = Decision.objects.filter(gate=OuterRef("pk"), kind=Decision.Kind.ENGINE).order_by(
        *Decision._meta.ordering
    )
    return queryset.annotate(
        latest_spec_version=Subquery(specs.values("version")[:1]),
        latest_engine_clauses=Subquery(decisions.values("clauses")[:1]),
    )


def clause_rows(clauses: list[dict]) -> list[dict]:
    return [_clause_row(clause) for clause in clauses]


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
