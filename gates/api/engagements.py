"""REST v1: engagements, gates and gate specs. HTTP only; services do the writing."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import (
    PAGE_PARAMETERS,
    choice_filter,
    filters_of,
    page_response,
    page_schema,
    slug_filter,
)
from gates.errors import NotAllowedError
from gates.models import Engagement, Gate, Organization
from gates.selectors import readout_is_current
from gates.services.runs.readouts import gate_readout_refresh
from gates.tenancy import get_visible_or_404, viewer_for_request, visible

NOT_BLANK = r"[^\s\x1c-\x1f\x85]"


class GateBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Gate
        fields = ["id", "kind", "state", "verdict", "stop_loss_review"]


class EngagementSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gates = GateBriefSerializer(many=True, read_only=True)

    class Meta:
        model = Engagement
        fields = [
            "id",
            "organization",
            "title",
            "model_name",
            "platform",
            "planned_start",
            "state",
            "created_at",
            "gates",
        ]


class EngagementListApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "EngagementCreate"

        organization = serializers.SlugField()
        # Blank once trimmed is refused: the schema says "some character that is not space".
        title = serializers.RegexField(NOT_BLANK, max_length=200)
        model_name = serializers.RegexField(NOT_BLANK, max_length=200)
        platform = serializers.CharField(required=False, allow_blank=True, default="")
        planned_start = serializers.DateField(required=False, allow_null=True, default=None)

    class FilterSerializer(serializers.Serializer):
        state = serializers.ChoiceField(Engagement.State.choices, required=False)
        organization = serializers.SlugField(required=False)

    @extend_schema(
        operation_id="v1_engagements_list",
        responses=page_schema("EngagementPage", EngagementSerializer),
        parameters=[
            *PAGE_PARAMETERS,
            choice_filter("state", Engagement.State.values, "Only engagements in this state."),
            slug_filter("organization", "Only this customer's (its slug)."),
        ],
    )
    def get(self, request):
        viewer = viewer_for_request(request)
        wanted = filters_of(request, self.FilterSerializer)
        if "organization" in wanted:
            wanted["organization__slug"] = wanted.pop("organization")
        engagements = visible(Engagement, viewer).filter(**wanted).select_related("organization")
        rows = engagements.prefetch_related("gates").order_by("-created_at", "-pk")
        return page_response(request, self, rows, EngagementSerializer)

    @idempotent
    @extend_schema(request=InputSerializer, responses={201: EngagementSerializer})
    def post(self, request):
        viewer = viewer_for_request(request)
        if not viewer.can("engagement.create"):
            raise NotAllowedError("only vendor staff may create engagements")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organization = get_visible_or_404(
            Organization, viewer, slug=data.validated_data.pop("organization")
        )
        engagement = services.engagement_create(
            actor=services.Actor.from_request(request),
            organization=organization,
            **data.validated_data,
        )
        return Response(EngagementSerializer(engagement).data, status=status.HTTP_201_CREATED)


class EngagementDetailApi(APIView):
    @extend_schema(responses=EngagementSerializer)
    def get(self, request, pk: int):
        engagement = get_visible_or_404(Engagement, viewer_for_request(request), pk=pk)
        return Response(EngagementSerializer(engagement).data)


class ClauseSerializer(serializers.Serializer):
    metric = serializers.CharField()
    tiers = serializers.JSONField()
    compare = serializers.CharField(allow_null=True, required=False)
    change = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="G3: reduction, gain, ratio, or floor (a goodput floor on the arm `compare`)",
    )
    slo = serializers.CharField(
        allow_null=True,
        required=False,
        help_text='A goodput clause\'s SLO in words: "TTFT ≤ 2 s and TPOT ≤ 50 ms"',
    )
    threshold = serializers.FloatField(allow_null=True)
    unit = serializers.CharField(
        allow_null=True, help_text='What threshold and estimate are in: "%", "x", "GiB", ...'
    )
    comparison = serializers.ChoiceField(
        choices=[
            "reduction",
            "gain",
            "ratio",
            "equals",
            "at_least",
            "at_most",
            "matches",
            "present",
            "within_band",
        ],
        allow_null=True,
        help_text=(
            "reduction / gain: at least threshold % better; ratio: at least threshold x; "
            "within_band: a replayed G2 hit cell against the planner's band (advisory)."
        ),
    )
    estimate = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField()
    cause = serializers.CharField(allow_blank=True, allow_null=True)


class GateDetailApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        engagement = serializers.IntegerField(source="engagement_id")
        kind = serializers.CharField()
        state = serializers.CharField()
        verdict = serializers.CharField()
        stop_loss_review = serializers.BooleanField()
        spec_version = serializers.IntegerField(allow_null=True)
        in_force_version = serializers.IntegerField(allow_null=True)
        latest_decision = serializers.DictField(allow_null=True)
        decided_at = serializers.DateTimeField(allow_null=True)
        clauses = ClauseSerializer(many=True)

    @extend_schema(responses=OutputSerializer)
    def get(self, request, pk: int):
        # Built by hand from the gate row and its stored readout, not through the serializer
        # (which still documents it): this is the read CI polls (bench/api_speed.py).
        gate = get_visible_or_404(Gate, viewer_for_request(request), pk=pk)
        readout = gate.readout
        if not readout_is_current(readout):
            readout = gate_readout_refresh(gate.pk)
        return Response(
            {
                "id": gate.pk,
                "engagement": gate.engagement_id,
                "kind": gate.kind,
                "state": gate.state,
                "verdict": gate.verdict,
                "stop_loss_review": gate.stop_loss_review,
                "decided_at": _DATETIME.to_representation(gate.decided_at)
                if gate.decided_at
                else None,
                **{key: readout[key] for key in READOUT_FIELDS},
            }
        )


READOUT_FIELDS = ("spec_version", "in_force_version", "latest_decision", "clauses")
_DATETIME = serializers.DateTimeField()  # DRF's rendering of a time, as every other field
