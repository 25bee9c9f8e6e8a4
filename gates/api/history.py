"""REST v1: a gate's clause history, one clause across the engagements the caller may see, and
two runs compared cell by cell: the data of the history and compare pages as JSON. HTTP only;
reads through gates.history and the pages' tenancy-scoped reads. The serializers document the
answers, which are built by hand from the pure modules' dataclasses."""

from __future__ import annotations

from datetime import datetime

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import figures
from gates.decisions.statistics.change import Change
from gates.history.comparison import ArmChange, CellChange, Comparison, RunRecord, Side
from gates.history.reads import gate_cells, visible_clause_cells, visible_comparison
from gates.history.series import BarStep, CellHistory, HistoryPoint
from gates.models import Gate
from gates.tenancy import get_visible_or_404, viewer_for_request


class ShownSerializer(serializers.Serializer):
    estimate = serializers.CharField(help_text="As the pages write it: '30.25 %'.")
    interval = serializers.CharField(allow_null=True, help_text="'26.50 % to 34.00 %'.")


class PointSerializer(serializers.Serializer):
    decided_at = serializers.DateTimeField()
    decision = serializers.IntegerField()
    run = serializers.IntegerField(allow_null=True)
    attempt = serializers.IntegerField(allow_null=True, help_text="The run's number (#N).")
    spec_version = serializers.IntegerField()
    rehearsal = serializers.BooleanField()
    verdict = serializers.CharField()
    estimate = serializers.FloatField()
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    threshold = serializers.FloatField(allow_null=True)
    shown = ShownSerializer()


class BarStepSerializer(serializers.Serializer):
    spec_version = serializers.IntegerField()
    threshold = serializers.FloatField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    in_force = serializers.BooleanField(help_text="False: never signed by both (a rehearsal bar).")


class CellHistorySerializer(serializers.Serializer):
    gate = serializers.IntegerField()
    engagement = serializers.IntegerField()
    engagement_title = serializers.CharField()
    key = serializers.CharField(help_text="The clause and its tier: 'ttft_p50:...@c=16'.")
    clause = serializers.CharField(help_text="What ?clause= names on GET /api/v1/history/.")
    tier = serializers.IntegerField(allow_null=True)
    title = serializers.CharField()
    unit = serializers.CharField()
    comparison = serializers.CharField(allow_null=True)
    points = PointSerializer(many=True)
    bar = BarStepSerializer(many=True)


class GateHistorySerializer(serializers.Serializer):
    gate = serializers.IntegerField()
    kind = serializers.CharField()
    cells = CellHistorySerializer(many=True)


class ClauseChoiceSerializer(serializers.Serializer):
    clause = serializers.CharField()
    words = serializers.CharField()


class ClauseHistorySerializer(serializers.Serializer):
    clause = serializers.CharField(help_text="The clause shown: the one asked for, else the first.")
    choices = ClauseChoiceSerializer(many=True)
    cells = CellHistorySerializer(many=True)


class GateHistoryApi(APIView):
    @extend_schema(responses=GateHistorySerializer)
    def get(self, request, pk: int):
        gate = get_visible_or_404(Gate, viewer_for_request(request), pk=pk)
        cells = [cell_json(cell) for cell in gate_cells(gate)]
        return Response({"gate": gate.pk, "kind": gate.kind, "cells": cells})


class ClauseHistoryApi(APIView):
    @extend_schema(
        responses=ClauseHistorySerializer,
        parameters=[OpenApiParameter("clause", str, description="A clause's `clause` value.")],
    )
    def get(self, request):
        asked = request.query_params.get("clause", "")
        clause, choices, cells = visible_clause_cells(viewer_for_request(request), asked)
        return Response(
            {
                "clause": clause,
                "choices": [{"clause": slug, "words": words} for slug, words in choices],
                "cells": [cell_json(cell) for cell in cells],
            }
        )


def cell_json(cell: CellHistory) -> dict:
    return {
        "gate": cell.gate_id,
        "engagement": cell.engagement_id,
        "engagement_title": cell.engagement,
        "key": cell.key,
        "clause": cell.clause,
        "tier": cell.tier,
        "title": cell.title,
        "unit": cell.unit,
        "comparison": cell.comparison,
        "points": [_point_json(point, cell.unit) for point in cell.points],
        "bar": [_step_json(step) for step in cell.bar],
    }


def _point_json(point: HistoryPoint, unit: str) -> dict:
    return {
        "decided_at": _iso(point.decided_at),
        "decision": point.decision_id,
        "run": point.run_id,
        "attempt": point.run_attempt,
        "spec_version": point.spec_version,
        "rehearsal": point.rehearsal,
        "verdict": point.verdict,
        "estimate": point.estimate,
        "low": point.low,
        "high": point.high,
        "threshold": point.threshold,
        "shown": _shown(point.estimate, point.low, point.high, unit),
    }


def _shown(estimate: float | None, low: float | None, high: float | None, unit: str) -> dict:
    shown, shown_low, shown_high = figures.estimate_interval(estimate, low, high, unit)
    interval = f"{shown_low} to {shown_high}" if low is not None and high is not None else None
    return {"estimate": shown, "interval": interval}


def _step_json(step: BarStep) -> dict:
    return {
        "spec_version": step.spec_version,
        "threshold": step.threshold,
        "start": _iso(step.start),
        "end": _iso(step.end),
        "in_force": step.in_force,
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat()


# --- two runs compared ---------------------------------------------------------------------


class RunBriefSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    attempt = serializers.IntegerField()
    gate = serializers.IntegerField()
    kind = serializers.CharField()
    engagement = serializers.IntegerField()
    spec_version = serializers.IntegerField()
    decision = serializers.IntegerField(allow_null=True)
    verdict = serializers.CharField(allow_null=True)


class SideSerializer(serializers.Serializer):
    estimate = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField()
    repetitions = serializers.IntegerField()
    shown = ShownSerializer()


class ChangeSerializer(serializers.Serializer):
    log_change = serializers.FloatField(help_text="Mean log-ratio after minus before.")
    low = serializers.FloatField()
    high = serializers.FloatField()
    ratio = serializers.FloatField(help_text="exp(log_change): the measured ratio's factor.")
    ratio_low = serializers.FloatField()
    ratio_high = serializers.FloatField()
    confidence = serializers.FloatField()
    degrees_of_freedom = serializers.FloatField()
    distinguishable = serializers.BooleanField(help_text="The interval leaves out no change.")


class ArmChangeSerializer(serializers.Serializer):
    arm = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField(help_text="ms, tokens/s or requests/s; empty when unknown.")
    before = serializers.FloatField(
        allow_null=True, help_text="The arm's geometric mean over the earlier run's repetitions."
    )
    after = serializers.FloatField(allow_null=True)
    change = ChangeSerializer(allow_null=True, help_text="Null: under two repetitions in a run.")
    reading = serializers.ChoiceField(
        choices=["better", "worse", "changed", "no distinguishable change", "too few repetitions"]
    )


class CellChangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    unit = serializers.CharField()
    before = SideSerializer()
    after = SideSerializer()
    change = ChangeSerializer(allow_null=True, help_text="Null: under two repetitions in a run.")
    reading = serializers.ChoiceField(
        choices=["better", "worse", "no distinguishable change", "too few repetitions"]
    )
    arms = ArmChangeSerializer(many=True, help_text="Each compared arm's own metric.")


class ComparisonSerializer(serializers.Serializer):
    before = RunBriefSerializer()
    after = RunBriefSerializer()
    comparable = serializers.BooleanField()
    reasons = serializers.ListField(child=serializers.CharField(), help_text="Why not compared.")
    notes = serializers.ListField(child=serializers.CharField())
    method = serializers.CharField()
    confidence = serializers.FloatField()
    cells = CellChangeSerializer(many=True)


class RunCompareApi(APIView):
    @extend_schema(responses=ComparisonSerializer)
    def get(self, request, pk: int, other: int):
        """Run `other` against run `id` (before): both must be visible to the caller."""
        return Response(comparison_json(visible_comparison(viewer_for_request(request), pk, other)))


def comparison_json(comparison: Comparison) -> dict:
    return {
        "before": _run_json(comparison.before),
        "after": _run_json(comparison.after),
        "comparable": comparison.comparable,
        "reasons": comparison.reasons,
        "notes": comparison.notes,
        "method": comparison.method,
        "confidence": comparison.confidence,
        "cells": [_cell_change_json(row) for row in comparison.rows],
    }


def _run_json(run: RunRecord) -> dict:
    return {
        "run": run.run_id,
        "attempt": run.attempt,
        "gate": run.gate_id,
        "kind": run.gate_kind,
        "engagement": run.engagement_id,
        "spec_version": run.spec_version,
        "decision": run.decision_id,
        "verdict": run.verdict,
    }


def _cell_change_json(row: CellChange) -> dict:
    return {
        "key": row.key,
        "title": row.title,
        "unit": row.unit,
        "before": _side_json(row.before, row.unit),
        "after": _side_json(row.after, row.unit),
        "change": _change_json(row.change),
        "reading": row.reading,
        "arms": [_arm_change_json(arm) for arm in row.arms],
    }


def _arm_change_json(arm: ArmChange) -> dict:
    return {
        "arm": arm.arm,
        "metric": arm.metric,
        "unit": arm.unit,
        "before": arm.before,
        "after": arm.after,
        "change": _change_json(arm.change),
        "reading": arm.reading,
    }


def _side_json(side: Side, unit: str) -> dict:
    numbers = {"estimate": side.estimate, "low": side.low, "high": side.high}
    shown = _shown(side.estimate, side.low, side.high, unit)
    return numbers | {"verdict": side.verdict, "repetitions": side.repetitions, "shown": shown}


def _change_json(change: Change | None) -> dict | None:
    if change is None:
        return None
    return {
        "log_change": change.log_change,
        "low": change.low,
        "high": change.high,
        "ratio": change.ratio,
        "ratio_low": change.ratio_low,
        "ratio_high": change.ratio_high,
        "confidence": change.confidence,
        "degrees_of_freedom": change.degrees_of_freedom,
        "distinguishable": change.distinguishable,
    }
