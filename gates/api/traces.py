"""REST v1: an engagement's workload traces (upload, list, characterisation and the planner's
per-tier prediction). HTTP only: services.trace_upload validates and stores."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import selectors, services
from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import PAGE_PARAMETERS, page_response, page_schema
from gates.errors import NotAllowedError
from gates.history.trace_points import trace_measured_points
from gates.models import Engagement, WorkloadTrace
from gates.tenancy import get_visible_or_404, viewer_for_request
from runners.traces.readers.formats import FORMATS


class TraceUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="The trace as exported (docs/workloads.md).")
    format = serializers.ChoiceField(choices=sorted(FORMATS))
    block_tokens = serializers.IntegerField(
        min_value=1, max_value=1_000_000, required=False, help_text="Left out: the format's."
    )


class TraceProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class TraceReferenceSerializer(serializers.Serializer):
    sha256 = serializers.CharField()
    format = serializers.CharField()
    block_tokens = serializers.IntegerField(allow_null=True)


class TraceBriefSerializer(serializers.Serializer):
    """What selectors.trace_brief answers (the schema of the responses)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    format = serializers.CharField()
    block_tokens = serializers.IntegerField(allow_null=True)
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    requests = serializers.IntegerField()
    state = serializers.CharField(help_text="characterizing, ready or failed")
    progress = TraceProgressSerializer()
    error = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    spec_reference = TraceReferenceSerializer(help_text="Paste under a spec's workload.trace.")


class TraceDetailSerializer(TraceBriefSerializer):
    profile = serializers.JSONField(allow_null=True, help_text="The characterisation.")
    prediction = serializers.JSONField(allow_null=True, help_text="Hit share per tier, band.")
    prediction_missing = serializers.CharField(required=False)
    tier_inputs = serializers.JSONField(required=False)
    measured = serializers.JSONField(
        help_text="{points, missing}: the hit rates this engagement's G2 and G3 runs measured "
        "replaying the trace, each at the capacity its cell ran with (run, gate, attempt, arm, "
        "tier, kind gpu|tiers, capacity_tokens, hit, repetitions, sample); missing: why none "
        "could be placed (gates.history.trace_points)."
    )


class TierInputsSerializer(serializers.Serializer):
    dram_gib = serializers.FloatField(min_value=0, required=False)
    ssd_gib = serializers.FloatField(min_value=0, required=False)
    link_gbps = serializers.FloatField(min_value=0.001, required=False)
    ssd_gbps = serializers.FloatField(min_value=0.001, required=False)
    prefill_tokens_per_s = serializers.FloatField(min_value=1, required=False)


class EngagementTracesApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="v1_engagements_traces_list",
        responses={200: page_schema("TracePage", TraceBriefSerializer)},
        parameters=PAGE_PARAMETERS,
    )
    def get(self, request, pk: int):
        viewer = viewer_for_request(request)
        engagement = get_visible_or_404(Engagement, viewer, pk=pk)
        traces = engagement.traces.defer("content", "profile")
        return page_response(
            request, self, traces, render=lambda page: [selectors.trace_brief(t) for t in page]
        )

    @idempotent
    @extend_schema(request=TraceUploadSerializer, responses={201: TraceBriefSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        engagement = get_visible_or_404(Engagement, viewer, pk=pk)
        if not viewer.can("trace.upload"):  # before reading a file it would refuse anyway
            raise NotAllowedError("only vendor engineers and customer owners may upload traces")
        data = TraceUploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        trace = services.trace_upload(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            engagement=engagement,
            name=upload.name,
            content=upload.read(),
            trace_format=data.validated_data["format"],
            block_tokens=data.validated_data.get("block_tokens"),
        )
        return Response(selectors.trace_brief(trace), status=status.HTTP_201_CREATED)


class TraceDetailApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(name, float, required=False) for name in selectors.TRACE_TIER_INPUTS
        ],
        responses={200: TraceDetailSerializer},
    )
    def get(self, request, pk: int):
        viewer = viewer_for_request(request)
        queryset = WorkloadTrace.objects.defer("content").select_related("engagement")
        trace = get_visible_or_404(queryset, viewer, pk=pk)
        tiers = TierInputsSerializer(data=request.query_params)
        tiers.is_valid(raise_exception=True)
        readout = selectors.trace_readout(trace, dict(tiers.validated_data))
        return Response({**readout, "measured": trace_measured_points(trace, viewer)})
