"""REST v1: runs of a gate (a host to drive, or an upload run naming the profile its person
ran), their progress, measurements, cancel, and a soak's stop and extension."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.hosts import RunProfileSerializer
from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import (
    PAGE_PARAMETERS,
    choice_filter,
    filters_of,
    page_response,
    page_schema,
)
from gates.api.soak import SoakSerializer
from gates.errors import NotFoundError, ServiceError
from gates.logtail import CHUNK_CHARS, TAIL_CHARS, log_after, log_tail
from gates.models import Gate, Host, Measurement, Profile, Run, Soak
from gates.selectors import run_predicted_ttft
from gates.tenancy import get_visible_or_404, viewer_for_request


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(source="progress_done")
    total = serializers.IntegerField(source="progress_total")


class LogWindowSerializer(serializers.Serializer):
    """A window onto the run's log; offsets count characters ever written (gates/logtail.py)."""

    text = serializers.CharField(help_text="Whole lines, oldest first.")
    offset = serializers.IntegerField(help_text="Where `text` starts.")
    next = serializers.IntegerField(help_text="Ask `?after=next` for what follows.")
    skipped = serializers.BooleanField(help_text="Earlier text exists that is not included.")


class RunSerializer(serializers.ModelSerializer):
    """A run; `log_tail` is its newest log lines, or what follows `?after=` when the caller
    gives one (the context's `log_after`)."""

    gate = serializers.IntegerField(source="gate_id")
    host = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    spec_version = serializers.IntegerField(source="spec.version")
    progress = ProgressSerializer(source="*")
    soak = serializers.SerializerMethodField()
    log_tail = serializers.SerializerMethodField()
    spent_attempt = serializers.SerializerMethodField(
        help_text="Whether this run spent its attempt's share of the gate's error budget: a "
        "verdict that tested something, or, for G3, one complete repetition (every arm and tier "
        "measured), while the run goes on or however it ended: a cancel does not give it back."
    )

    profile = RunProfileSerializer(source="profile_summary", read_only=True, allow_null=True)
    # G3 carry_repetitions: the attempt it continues (its column), how many, where its own start.
    carried_from = serializers.IntegerField(
        source="carried_from_id",
        read_only=True,
        allow_null=True,
        help_text="The run whose complete repetitions this G3 attempt carries "
        "(statistics.carry_repetitions); null when it started afresh.",
    )
    carried_repetitions = serializers.IntegerField(
        read_only=True,
        min_value=0,
        help_text="How many repetitions it carries from `carried_from` (and that run's own "
        "carried chain); its decision is made on these and its own. 0 when it started afresh.",
    )
    first_repetition = serializers.IntegerField(
        read_only=True,
        min_value=1,
        help_text="The number of its own first repetition: after every number the carried "
        "chain used, so one numbering covers the union (1 when it started afresh).",
    )

    predicted_ttft_change = serializers.SerializerMethodField()  # G3: band per tier, planned

    def get_spent_attempt(self, run: Run) -> bool:
        return services.run_spent_attempt(run)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_predicted_ttft_change(self, run: Run) -> dict | None:
        return run_predicted_ttft(run)

    @extend_schema_field(LogWindowSerializer)
    def get_log_tail(self, run: Run) -> dict:
        after = self.context.get("log_after")
        if after is None:
            return log_tail(run.log, run.log_written).as_dict()
        return log_after(run.log, run.log_written, after).as_dict()

    @extend_schema_field(SoakSerializer(allow_null=True))
    def get_soak(self, run: Run) -> dict | None:
        try:
            soak = run.soak  # select_related by a list; one query for a single run
        except Soak.DoesNotExist:
            return None
        return SoakSerializer(soak).data

    class Meta:
        model = Run
        fields = [
            "id",
            "gate",
            "attempt",
            "host",
            "profile",
            "spec_version",
            "rehearsal",
            "source",
            "state",
            "outcome",
            "reason",
            "progress",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "cancel_requested_at",
            "cancel_reason",
            "carried_from",
            "carried_repetitions",
            "first_repetition",
            "spent_attempt",
            "predicted_ttft_change",
            "soak",
            "log_tail",
        ]


class RunListSerializer(RunSerializer):
    """A run in a gate's list: no log (fifty runs' would weigh megabytes), no `spent_attempt`
    (its queries per run) and no predicted change; read one run for them."""

    class Meta(RunSerializer.Meta):
        fields = [
            name
            for name in RunSerializer.Meta.fields
            if name not in ("log_tail", "spent_attempt", "predicted_ttft_change")
        ]


UPLOAD_HELP = "An air-gapped run: results are uploaded to /results/."
PROFILE_HELP = (
    "An upload run only: the name of the profile whose command lines were run. Its snapshot "
    "is kept with the run, and its side services' metrics pages are read with each bench."
)
PARAMETERS_HELP = (
    "An upload run naming a profile only: values in place of a host's parameters "
    '(`{"offload_backend": "lmcache"}`), checked as a host\'s are.'
)

# The input serializer's rule "a host, or upload: true" as the schema states it.
RUN_START_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "host": {
                    "type": "string",
                    "pattern": "^[-a-zA-Z0-9_]+$",
                    "description": "The name of one of the customer's hosts to drive.",
                },
                "upload": {"type": "boolean", "enum": [False]},
            },
            "required": ["host"],
            "not": {"anyOf": [{"required": ["profile"]}, {"required": ["parameters"]}]},
        },
        {
            "type": "object",
            "properties": {
                "upload": {"type": "boolean", "enum": [True], "description": UPLOAD_HELP},
                "profile": {
                    "type": "string",
                    "pattern": "^[-a-zA-Z0-9_]+$",
                    "description": PROFILE_HELP,
                },
                "parameters": {"type": "object", "description": PARAMETERS_HELP},
            },
            "required": ["upload"],
            "not": {"required": ["host"]},
        },
    ]
}


class RunStartSerializer(serializers.Serializer):
    class Meta:
        ref_name = "RunStart"

    host = serializers.SlugField(
        required=False, help_text="The name of one of the customer's hosts to drive."
    )
    upload = serializers.BooleanField(default=False, help_text=UPLOAD_HELP)
    profile = serializers.SlugField(required=False, help_text=PROFILE_HELP)
    parameters = serializers.DictField(required=False, help_text=PARAMETERS_HELP)

    def validate(self, data: dict) -> dict:
        if bool(data.get("host")) == data["upload"]:
            raise serializers.ValidationError({"host": "give a host, or upload: true"})
        if data.get("host") and "profile" in data:
            raise serializers.ValidationError(
                {"profile": "only an upload run names a profile; a host run uses its host's"}
            )
        if "parameters" in data and "profile" not in data:
            raise serializers.ValidationError({"parameters": "only with a profile"})
        return data


def _host_named(gate: Gate, name: str) -> Host:
    """The host named, of the gate's customer; a 404 naming `host` otherwise."""
    host = Host.objects.filter(organization_id=gate.engagement.organization_id, name=name).first()
    if host is None:
        raise NotFoundError("no such host in this engagement's organization", field="host")
    return host


def _upload_profile(data: dict[str, Any]) -> services.UploadProfile | None:
    """The profile an upload run names, with its parameters; None when it names none. An
    unknown name is a 400 naming `profile`."""
    if "profile" not in data:
        return None
    profile = Profile.objects.filter(name=data["profile"]).first()
    if profile is None:
        raise ServiceError(f"no profile named {data['profile']!r}", field="profile")
    return services.UploadProfile(profile=profile, parameters=data.get("parameters") or {})


class GateRunsApi(APIView):
    class FilterSerializer(serializers.Serializer):
        state = serializers.ChoiceField(Run.State.choices, required=False)
        outcome = serializers.ChoiceField(Run.Outcome.choices, required=False)

    @extend_schema(
        operation_id="v1_gates_runs_list",
        responses=page_schema("RunPage", RunListSerializer),
        parameters=[
            *PAGE_PARAMETERS,
            choice_filter("state", Run.State.values, "Only runs in this state."),
            choice_filter("outcome", Run.Outcome.values, "Only finished runs of this outcome."),
        ],
    )
    def get(self, request, pk: int):
        gate = get_visible_or_404(Gate, viewer_for_request(request), pk=pk)
        wanted = filters_of(request, self.FilterSerializer)
        runs = gate.runs.filter(**wanted).select_related("spec", "host", "soak").defer("log")
        return page_response(request, self, runs, RunListSerializer)

    @idempotent
    @extend_schema(request={"application/json": RUN_START_SCHEMA}, responses={202: RunSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
        data = RunStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        host, source = None, Run.Source.UPLOAD
        if not data.validated_data["upload"]:
            host, source = _host_named(gate, data.validated_data["host"]), Run.Source.REMOTE
        run = services.run_create(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            gate=gate,
            host=host,
            # A labelled TextChoices member is a (value, label) tuple to mypy without django-stubs.
            source=source,  # type: ignore[arg-type]
            upload=_upload_profile(data.validated_data),
        )
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class RunDetailApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after",
                {"type": "integer", "minimum": 0},
                description=(
                    f"`log_tail` holds what the log gained after this offset (at most "
                    f"{CHUNK_CHARS} characters, whole lines) instead of the newest "
                    f"{TAIL_CHARS}: poll with the `next` of the previous answer."
                ),
            )
        ],
        responses=RunSerializer,
    )
    def get(self, request, pk: int):
        run = get_visible_or_404(
            Run.objects.select_related("spec", "host"), viewer_for_request(request), pk=pk
        )
        after = _log_offset(request.query_params.get("after"))
        return Response(RunSerializer(run, context={"log_after": after}).data)


def _log_offset(text: str | None) -> int | None:
    """The `?after=` offset, or None without one; a bad one is a 400 naming `after`."""
    if text is None:
        return None
    try:
        return serializers.IntegerField(min_value=0).run_validation(text)
    except serializers.ValidationError as error:
        raise serializers.ValidationError({"after": error.detail}) from error


class RunCancelSerializer(serializers.Serializer):
    reason = serializers.CharField(
        min_length=services.MIN_CANCEL_REASON_CHARS,
        max_length=500,
        help_text="Why the run is canceled (at least 10 characters); kept with the run and "
        "in the audit log.",
    )


class RunCancelApi(APIView):
    @extend_schema(request=RunCancelSerializer, responses={202: RunSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        run = get_visible_or_404(Run, viewer, pk=pk)
        given = RunCancelSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        run = services.run_cancel(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            reason=given.validated_data["reason"],
        )
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class MeasurementSerializer(serializers.ModelSerializer):
    artifact_sha256 = serializers.CharField(source="artifact.sha256", allow_null=True, default=None)

    class Meta:
        model = Measurement
        fields = ["arm", "tier", "repetition", "metrics", "server", "artifact_sha256"]


class RunMeasurementsApi(APIView):
    @extend_schema(
        operation_id="v1_runs_measurements_list",
        responses=page_schema("MeasurementPage", MeasurementSerializer),
        parameters=PAGE_PARAMETERS,
    )
    def get(self, request, pk: int):
        run = get_visible_or_404(Run, viewer_for_request(request), pk=pk)
        rows = run.measurements.select_related("artifact").order_by(
            "repetition", "tier", "arm", "pk"
        )
        return page_response(request, self, rows, MeasurementSerializer)


class SoakStopApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SoakStop"

        reason = serializers.CharField(required=False, allow_blank=True, max_length=500)

    @extend_schema(request=InputSerializer, responses={202: RunSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        run = get_visible_or_404(Run.objects.select_related("spec", "host"), viewer, pk=pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.soak_stop(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            reason=data.validated_data.get("reason", ""),
        )
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class SoakExtendApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SoakExtend"

        hours = serializers.FloatField(min_value=0.001, max_value=168)

    @extend_schema(request=InputSerializer, responses={202: RunSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        run = get_visible_or_404(Run.objects.select_related("spec", "host"), viewer, pk=pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.soak_extend(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            hours=data.validated_data["hours"],
        )
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
