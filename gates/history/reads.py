"""Reads for the history and compare views (pages and API alike), in a fixed number of queries
whatever the number of decisions: engine decisions with their run and spec version, spec versions
with when both parties had signed them, and two runs with their latest engine decisions. Tenancy
through gates.tenancy; writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import F, OuterRef, QuerySet, Subquery
from django.http import Http404
from django.utils import timezone

from gates.history.comparison import Comparison, RunRecord, compare_runs
from gates.history.series import (
    CellHistory,
    DecisionRecord,
    VersionRecord,
    cell_histories,
    cell_points,
    clause_choices,
    with_bars,
)
from gates.models import Decision, Gate, GateSpec, Run, SpecSignature
from gates.tenancy import Viewer, visible

PARTIES = ("vendor", "customer")
MAX_COMPARE_LINKS = 5  # on a run page; any two runs compare at /runs/<a>/compare/<b>/


def gate_decision_records(gate: Gate) -> list[DecisionRecord]:
    """The gate's engine decisions, oldest first: one query."""
    return _decision_records(Decision.objects.filter(gate=gate))


def visible_decision_records(viewer: Viewer) -> list[DecisionRecord]:
    """Every engine decision of every engagement this viewer may see: one query."""
    return _decision_records(visible(Decision, viewer))


def version_records(gate_ids: Iterable[int]) -> list[VersionRecord]:
    """The gates' spec versions with when the second party signed each: one query."""
    specs = GateSpec.objects.filter(gate_id__in=list(gate_ids)).annotate(
        **{f"{party}_signed_at": _signed_at(party) for party in PARTIES}
    )
    rows = specs.values("gate_id", "version", *(f"{party}_signed_at" for party in PARTIES))
    return [VersionRecord(row["gate_id"], row["version"], _both_signed_at(row)) for row in rows]


def _decision_records(decisions: QuerySet) -> list[DecisionRecord]:
    # A decision names the run it decided; the newest attempt if an upload named several.
    runs = Run.objects.filter(decisions=OuterRef("pk")).order_by("-attempt", "-pk")
    rows = (
        decisions.filter(kind=Decision.Kind.ENGINE)
        .annotate(
            run_pk=Subquery(runs.values("pk")[:1]),
            run_attempt=Subquery(runs.values("attempt")[:1]),
            spec_version=F("spec__version"),
            gate_kind=F("gate__kind"),
            engagement_pk=F("gate__engagement_id"),
            engagement_title=F("gate__engagement__title"),
        )
        .order_by("created_at", "pk")
        .values(
            "pk",
            "gate_id",
            "gate_kind",
            "engagement_pk",
            "engagement_title",
            "created_at",
            "run_pk",
            "run_attempt",
            "spec_version",
            "rehearsal",
            "clauses",
        )
    )
    return [_decision_record(row) for row in rows]


def _decision_record(row: dict) -> DecisionRecord:
    return DecisionRecord(
        decision_id=row["pk"],
        gate_id=row["gate_id"],
        gate_kind=row["gate_kind"],
        engagement_id=row["engagement_pk"],
        engagement=row["engagement_title"],
        decided_at=row["created_at"],
        run_id=row["run_pk"],
        run_attempt=row["run_attempt"],
        spec_version=row["spec_version"],
        rehearsal=row["rehearsal"],
        clauses=row["clauses"] if isinstance(row["clauses"], list) else [],
    )


def _signed_at(party: str) -> Subquery:
    """When `party` first signed the outer version's own digest."""
    signatures = SpecSignature.objects.filter(
        spec=OuterRef("pk"), party=party, digest=OuterRef("digest")
    ).order_by("signed_at")
    return Subquery(signatures.values("signed_at")[:1])


def _both_signed_at(row: dict) -> datetime | None:
    times = [row[f"{party}_signed_at"] for party in PARTIES]
    return None if None in times else max(times)


def run_records(viewer: Viewer, first: int, second: int) -> dict[int, RunRecord]:
    """The two runs this viewer may see, each with its latest engine decision: two queries.
    A run the viewer may not see is missing from the answer (the caller's 404)."""
    runs = (
        visible(Run, viewer)
        .filter(pk__in=[first, second])
        .select_related("gate__engagement", "spec")
    )
    found = {run.pk: run for run in runs}
    latest = _latest_engine_decisions(found)
    return {pk: _run_record(run, latest.get(pk)) for pk, run in found.items()}


def _latest_engine_decisions(runs: dict[int, Run]) -> dict[int, Decision]:
    through = Decision.runs.through.objects.filter(
        run_id__in=list(runs), decision__kind=Decision.Kind.ENGINE
    ).select_related("decision")
    latest: dict[int, Decision] = {}
    for link in through.order_by("decision__created_at", "decision_id"):
        latest[link.run_id] = link.decision  # the newest one wins
    return latest


def _run_record(run: Run, decision: Decision | None) -> RunRecord:
    return RunRecord(
        run_id=run.pk,
        attempt=run.attempt,
        gate_id=run.gate_id,
        gate_kind=run.gate.kind,
        engagement_id=run.gate.engagement_id,
        engagement=run.gate.engagement.title,
        spec_version=run.spec.version,
        spec=run.spec.document if isinstance(run.spec.document, dict) else {},
        decision_id=decision.pk if decision else None,
        verdict=decision.verdict if decision else None,
        cells=decision.clauses if decision and isinstance(decision.clauses, list) else [],
    )


def decided_attempts_before(run: Run) -> list[Run]:
    """The gate's earlier attempts with an engine decision, the previous one first: what the
    run page offers to compare with. One query."""
    earlier = run.gate.runs.filter(attempt__lt=run.attempt, decisions__kind=Decision.Kind.ENGINE)
    return list(earlier.order_by("-attempt").distinct()[:MAX_COMPARE_LINKS])


# --- what the pages and the API show -----------------------------------------------------


def gate_cells(gate: Gate) -> list[CellHistory]:
    """Every cell of the gate with a number, its points and bar: two queries."""
    versions = version_records([gate.pk])
    return cell_histories(gate_decision_records(gate), versions, timezone.now())


def visible_clause_cells(
    viewer: Viewer, asked: str
) -> tuple[str, list[tuple[str, str]], list[CellHistory]]:
    """The clause asked for (the first one with a number when it names none), every clause
    there is to choose from, and the chosen clause's cells in every engagement: two queries."""
    cells = cell_points(visible_decision_records(viewer))
    choices = clause_choices(cells)
    slugs = [slug for slug, _ in choices]
    clause = asked if asked in slugs else (slugs[0] if slugs else "")
    chosen = [cell for cell in cells if cell.clause == clause]
    versions = version_records({cell.gate_id for cell in chosen})
    return clause, choices, with_bars(chosen, versions, timezone.now())


def visible_comparison(viewer: Viewer, before: int, after: int) -> Comparison:
    """Run `after` against run `before`; a 404 unless the viewer may see both."""
    records = run_records(viewer, before, after)
    if before not in records or after not in records:
        raise Http404("not found")
    return compare_runs(records[before], records[after])
