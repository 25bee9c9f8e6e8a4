"""REST v1: an engagement's workload traces (upload, list, characterisation and the planner's
per-tier prediction). HTTP only: services.trace_upload validates and stores."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import selectors, services
from gates.api.rest.idempotency import idempotent
from gates.errors import NotAllowedError
from gates.models import Engagement, WorkloadTrace
from gates.tenancy import get_visible_or_404, viewer_for_request
from runners.traces.readers.formats import FORMATS


class TraceUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="The trace as exported (docs/workloads.md).")
    format = serializers.ChoiceField(choices=sorted(FORMATS))
    block_tokens = serializers.IntegerField(
        min_value=1, max_value=1_000_000, required=False, help_text="Left out: the format's."
    )


class TierInputsSerializer(serializers.Serializer):
    dram_gib = serializers.FloatField(min_value=0, required=False)
    ssd_gib = serializers.FloatField(min_value=0, required=False)
    link_gbps = serializers.FloatField(min_value=0.001, required=False)
    ssd_gbps = serializers.FloatField(min_value=0.001, required=False)
    prefill_tokens_per_s = serializers.FloatField(min_value=1, required=False)


class EngagementTracesApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses={200: dict})
    def get(self, request, pk: int):
        viewer = viewer_for_request(request)
        engagement = get_visible_or_404(Engagement, viewer, pk=pk)
        traces = engagement.traces.defer("content", "profile")
        return Response([selectors.trace_brief(trace) for trace in traces])

    @idempotent
    @extend_schema(request=TraceUploadSerializer, responses={201: dict})
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
        responses={200: dict},
    )
    def get(self, request, pk: int):
        viewer = viewer_for_request(request)
        queryset = WorkloadTrace.objects.defer("content").select_related("engagement")
        trace = get_visible_or_404(queryset, viewer, pk=pk)
        tiers = TierInputsSerializer(data=request.query_params)
        tiers.is_valid(raise_exception=True)
        return Response(selectors.trace_readout(trace, dict(tiers.validated_data)))
