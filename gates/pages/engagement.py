"""What the engagement page shows: each gate's plan against what happened, its attempts and
signatures, the stop-loss state, the recent runs. Reads models only, in a fixed number of
queries whatever the number of runs; the figure comes from gates.charts.timeline."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from gates.charts.timeline import GateSpan, timeline_figure
from gates.models import Engagement, Gate, GateSpec, Run
from gates.services.runs.attempts import gate_attempts_allowed, gate_attempts_spent

RECENT_RUNS = 10
ACTIVE = (Run.State.QUEUED, Run.State.RUNNING)


@dataclass(frozen=True)
class GateRow:
    gate: Gate
    span: GateSpan
    runs: int
    active_runs: int
    attempts_spent: int
    attempts_allowed: int | None
    spec: GateSpec | None
    signatures: dict  # party -> SpecSignature over the current version's digest


def engagement_overview(engagement: Engagement) -> dict:
    rows = [_gate_row(gate, specs) for gate, specs in _gates_with_specs(engagement)]
    now = timezone.now()
    return {
        "rows": rows,
        "timeline": timeline_figure([row.span for row in rows], now),
        "review": [row.gate for row in rows if row.gate.stop_loss_review],
        "running": [row.gate for row in rows if row.active_runs],
        "recent_runs": list(
            Run.objects.filter(gate__engagement=engagement)
            .select_related("gate", "host")
            .defer("log")[:RECENT_RUNS]
        ),
    }


def _gates_with_specs(engagement: Engagement) -> list[tuple[Gate, list[GateSpec]]]:
    gates = engagement.gates.annotate(
        first_started=Min("runs__started_at"),
        last_finished=Max("runs__finished_at"),
        run_count=Count("runs"),
        active_count=Count("runs", filter=Q(runs__state__in=ACTIVE)),
    ).order_by("position")
    specs = (
        GateSpec.objects.filter(gate__engagement=engagement)
        .prefetch_related("signatures__signed_by")
        .order_by("gate_id", "-version")
    )
    by_gate: dict[int, list[GateSpec]] = {}
    for spec in specs:
        by_gate.setdefault(spec.gate_id, []).append(spec)
    return [(gate, by_gate.get(gate.pk, [])) for gate in gates]


def _gate_row(gate: Gate, specs: list[GateSpec]) -> GateRow:
    spec = specs[0] if specs else None
    digest = spec.digest if spec else None
    signatures = {
        signature.party: signature
        for signature in (spec.signatures.all() if spec else [])
        if signature.digest == digest
    }
    return GateRow(
        gate=gate,
        span=_span(gate),
        runs=gate.run_count,
        active_runs=gate.active_count,
        attempts_spent=gate_attempts_spent(gate),
        attempts_allowed=gate_attempts_allowed(spec.document) if spec else None,
        spec=spec,
        signatures=signatures,
    )


def _span(gate: Gate) -> GateSpan:
    decided = gate.state in (Gate.State.DECIDED, Gate.State.WAIVED)
    end: datetime | None = gate.decided_at or gate.last_finished
    return GateSpan(
        kind=gate.kind,
        planned_start=gate.planned_start,
        planned_end=gate.planned_end,
        actual_start=gate.first_started,
        actual_end=end,
        verdict=gate.verdict,
        open=bool(gate.active_count) or not decided,
    )
