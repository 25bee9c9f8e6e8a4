"""REST v1: POST /api/v1/planner/, the KV headroom planner. HTTP only: reads an engagement's
saved inputs through tenancy and calls gates.planner; writes nothing.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gates.api.rest.parsers import LimitedJSONParser
from gates.errors import ServiceError
from gates.models import Engagement
from gates.planner import (
    KV_DTYPE_BYTES,
    WEIGHT_DTYPE_BYTES,
    PlannerError,
    plan,
    request_from_dict,
)
from gates.planner.charts import kv_fit_heatmap
from gates.planner.spec_check import engagement_plan_inputs, inputs_with_overrides
from gates.tenancy import get_visible_or_404, viewer_for_request

TRUE_WORDS = ("1", "true", "yes")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "a preset name, e.g. llama-3.1-70b"},
            {"type": "object", "additionalProperties": True},
        ]
    }
)
class ModelField(serializers.JSONField):
    """A preset name, or an object of architecture fields (layers, kv_heads, head_dim, ...)."""


@extend_schema_field(OpenApiTypes.OBJECT)
class ConfigField(serializers.JSONField):
    """A parsed Hugging Face config.json."""


class NumberField(serializers.FloatField):
    """A float that refuses JSON true/false (DRF would read them as 1.0 and 0.0)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


class BoundarySerializer(serializers.Serializer):
    class Meta:
        ref_name = "PlannerBoundary"

    max_concurrency_at_context = serializers.IntegerField()
    max_context_at_concurrency = serializers.IntegerField(
        allow_null=True, help_text="null: any context fits (every KV layer is windowed)"
    )


ERROR = inline_serializer(
    "PlannerApiError",
    {
        "error": serializers.CharField(),
        "detail": serializers.CharField(),
        "field": serializers.CharField(required=False),
    },
)


class PlannerApi(APIView):
    parser_classes = [LimitedJSONParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "PlannerInput"

        engagement = serializers.IntegerField(
            required=False,
            help_text="Start from this engagement's saved planner inputs; other fields override.",
        )
        model = ModelField(
            required=False, allow_null=True, help_text="A preset name or architecture fields."
        )
        config = ConfigField(
            required=False,
            allow_null=True,
            help_text="A parsed Hugging Face config.json, instead of model.",
        )
        gpus = serializers.IntegerField(required=False)
        gpu_mem_gib = NumberField(required=False, help_text="Memory of each GPU, GiB.")
        tensor_parallel_size = serializers.IntegerField(
            required=False, allow_null=True, help_text="Default: all GPUs."
        )
        kv_dtype = serializers.ChoiceField(choices=list(KV_DTYPE_BYTES), required=False)
        weight_bytes = serializers.IntegerField(required=False, allow_null=True)
        weight_dtype = serializers.ChoiceField(
            choices=list(WEIGHT_DTYPE_BYTES), required=False, allow_null=True
        )
        reserved_fraction = NumberField(required=False, help_text="VRAM kept back; 0.10.")
        concurrency = serializers.IntegerField(required=False)
        context_tokens = serializers.IntegerField(required=False)
        reuse_ratio = NumberField(required=False, help_text="Share of prefill reused, 0..1.")

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "PlannerResult"

        inputs = serializers.JSONField(help_text="The planner inputs this plan was made from.")
        model = serializers.CharField()
        kv_dtype = serializers.CharField()
        gpus = serializers.IntegerField()
        tensor_parallel_size = serializers.IntegerField()
        replicas = serializers.IntegerField()
        concurrency = serializers.IntegerField()
        context_tokens = serializers.IntegerField()
        reuse_ratio = serializers.FloatField()
        reserved_fraction = serializers.FloatField()
        kv_bytes_per_token = serializers.IntegerField()
        kv_bytes_per_token_per_gpu = serializers.IntegerField()
        weight_bytes = serializers.IntegerField()
        weight_bytes_per_gpu = serializers.IntegerField()
        kv_capacity_per_gpu_bytes = serializers.IntegerField()
        kv_capacity_bytes = serializers.IntegerField()
        sequences_per_replica = serializers.IntegerField()
        kv_demand_per_gpu_bytes = serializers.IntegerField()
        kv_demand_bytes = serializers.IntegerField()
        fits = serializers.BooleanField()
        headroom_bytes = serializers.IntegerField(help_text="Negative when the KV is short.")
        spill_fraction = serializers.FloatField()
        offload_capacity_needed_bytes = serializers.IntegerField()
        prefill_saving_share = serializers.FloatField()
        resident_saving_share = serializers.FloatField()
        offload_saving_share = serializers.FloatField()
        recommendation = serializers.ChoiceField(
            choices=["keep_resident", "offload_worth_testing", "offload_will_not_help"]
        )
        reasons = serializers.ListField(child=serializers.CharField())
        notes = serializers.ListField(child=serializers.CharField())
        boundary = BoundarySerializer()
        figure = serializers.JSONField(
            required=False, help_text="The Plotly heatmap (with ?figure=1)."
        )

    @extend_schema(
        request=InputSerializer,
        parameters=[
            OpenApiParameter(
                "figure", OpenApiTypes.BOOL, description="Add the Plotly heatmap as `figure`."
            )
        ],
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(ERROR, description="Bad input; `field` names it."),
            404: OpenApiResponse(ERROR, description="No such engagement visible to you."),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        unknown = sorted(set(request.data) - set(data.fields))
        if unknown:
            raise ServiceError("unknown field", field=str(unknown[0]))
        inputs = self._inputs(request, dict(data.validated_data))
        try:
            plan_request = request_from_dict(inputs)
            result = plan(plan_request)  # may still refuse, e.g. a config.json without weights
        except PlannerError as error:
            raise ServiceError(error.message, field=error.field) from None
        body: dict[str, Any] = {"inputs": inputs, **result.to_dict()}
        if request.query_params.get("figure", "").lower() in TRUE_WORDS:
            body["figure"] = kv_fit_heatmap(plan_request)
        return Response(self.OutputSerializer(body).data)

    def _inputs(self, request, fields: dict[str, Any]) -> dict[str, Any]:
        engagement_id = fields.pop("engagement", None)
        if engagement_id is None:
            return inputs_with_overrides({}, fields)
        engagement = get_visible_or_404(Engagement, viewer_for_request(request), pk=engagement_id)
        base = engagement_plan_inputs(engagement)
        if not base and fields.get("model") is None and fields.get("config") is None:
            raise ServiceError(
                "this engagement has no saved planner inputs and its model is not a preset; "
                "send model or config",
                field="engagement",
            )
        return inputs_with_overrides(base, fields)


# Routed from gates/api/urls.py as an include, so the API keeps its one URL map per module.
