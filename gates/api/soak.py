"""A soak's live state as the run's API entry carries it, and its samples. HTTP only."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from gates.models import Run, Soak, SoakSample
from gates.tenancy import get_visible_or_404, viewer_for_request

SAMPLES_PAGE = 500


class SoakSerializer(serializers.ModelSerializer):
    """A soak's live state: its gaps, and the verdict so far, marked provisional."""

    provisional = serializers.SerializerMethodField()
    retention = serializers.JSONField(source="retention_summary", read_only=True)

    class Meta:
        model = Soak
        fields = [
            "state",
            "compressed",
            "generation",
            "last_seq",
            "started",
            "deadline",
            "extended_h",
            "stop_reason",
            "heartbeat_age_s",
            "last_contact_at",
            "unreachable_since",
            "gaps",
            "notes",
            "health",
            "agent_exit",
            "provisional",
            "retention",
        ]

    def get_provisional(self, soak: Soak) -> dict | None:
        if not soak.provisional:
            return None
        keep = ("verdict", "reasons", "clauses")
        return {"provisional": True, **{key: soak.provisional.get(key) for key in keep}}


class SampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = SoakSample
        fields = ["seq", "window_start", "window_end", "metrics"]


class SamplePageSerializer(serializers.Serializer):
    results = SampleSerializer(many=True)
    next_after = serializers.IntegerField(allow_null=True)


class RunSamplesApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after",
                {"type": "integer", "minimum": 0},
                description="Return samples with seq > after",
            )
        ],
        responses=SamplePageSerializer,
    )
    def get(self, request, pk: int):
        run = get_visible_or_404(Run, viewer_for_request(request), pk=pk)
        after = serializers.IntegerField(min_value=0).run_validation(
            request.query_params.get("after", 0)
        )
        # The run was looked up through tenancy already: its samples are the viewer's to see.
        page = list(run.soak_samples.filter(seq__gt=after).order_by("seq")[:SAMPLES_PAGE])
        next_after = page[-1].seq if len(page) == SAMPLES_PAGE else None
        return Response(
            {"results": SampleSerializer(page, many=True).data, "next_after": next_after}
        )
