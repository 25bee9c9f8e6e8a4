"""REST v1: results uploaded from air-gapped hosts, read by the same adapters as fetched ones.

HTTP only: runners.results (pure) reads the files as it reads fetched ones; services store them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.rest.idempotency import idempotent
from gates.api.runs import RunSerializer
from gates.errors import ServiceError
from gates.models import Run
from gates.tenancy import get_visible_or_404, viewer_for_request
from runners import results
from runners.engine import Engine, engine_of

MAX_UPLOAD_BYTES = 64 * 1024 * 1024
KINDS = ("bench", "probe", "answers", "health")
# A side service's page around a bench: `<service>_metrics_before` or `_after`.
SERVICE_PAGE = re.compile(r"[a-z][a-z0-9_-]{0,39}_metrics_(before|after)")


class UploadSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KINDS)
    file = serializers.FileField(required=False, help_text="The tool's output, as written.")
    arm = serializers.RegexField(r"^[a-z_]{1,32}$", required=False)
    tier = serializers.IntegerField(min_value=1, max_value=4096, required=False)
    repetition = serializers.IntegerField(min_value=1, max_value=1000, required=False)
    probe = serializers.RegexField(r"^[a-z_]{1,40}$", required=False)
    seconds = serializers.FloatField(min_value=0, required=False)
    metrics_before = serializers.FileField(required=False, help_text="/metrics before the bench")
    metrics_after = serializers.FileField(required=False, help_text="/metrics after the bench")

    REQUIRED = {
        "bench": ("file", "arm", "tier", "repetition"),
        "probe": ("file", "probe"),
        "answers": ("file", "arm"),
        "health": ("seconds",),
    }

    def validate(self, data: dict) -> dict:
        for name in self.REQUIRED[data["kind"]]:
            if data.get(name) is None:
                raise serializers.ValidationError({name: f"required for {data['kind']}"})
        for name in ("file", "metrics_before", "metrics_after"):
            if data.get(name) is not None and data[name].size > MAX_UPLOAD_BYTES:
                raise serializers.ValidationError({name: "larger than 64 MiB"})
        return data


class RunResultsApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @idempotent
    @extend_schema(request=UploadSerializer, responses={201: RunSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        run = get_visible_or_404(Run.objects.select_related("spec", "host"), viewer, pk=pk)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        name, proof = _read({**data.validated_data, "run": run, "files": request.FILES})
        services.run_upload_record(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            name=name,
            proof=proof,
        )
        run.refresh_from_db()
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class RunDecideApi(APIView):
    @idempotent
    @extend_schema(
        request=None,
        responses={200: inline_serializer("DecideResult", {"verdict": serializers.CharField()})},
    )
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        run = get_visible_or_404(Run.objects.select_related("spec"), viewer, pk=pk)
        evaluation = services.run_upload_decide(
            actor=services.Actor.from_request(request), viewer=viewer, run=run
        )
        return Response({"verdict": evaluation.verdict})


def _read(data: dict) -> tuple[str, results.Proof]:
    """The upload's step name, and what its files prove; a file that proves nothing is a 400
    naming the form field it came in."""
    read = {"bench": _bench, "probe": _probe, "answers": _answers, "health": _health}
    try:
        return read[data["kind"]](data)
    except results.ResultError as error:
        raise ServiceError(str(error), field=error.field) from error


def _bench(data: dict) -> tuple[str, results.Proof]:
    cell = results.Cell(data["arm"], data["tier"], data["repetition"])
    before, after = (_named_if_given(data.get(f"metrics_{m}")) for m in ("before", "after"))
    run: Run = data["run"]
    engine = engine_of(run.profile_snapshot["commands"]) if run.profile_snapshot else None
    proof = results.bench_files_proof(
        _named(data["file"]), cell=cell, before=before, after=after, engine=engine
    )
    if engine is not None:
        pages = _service_pages(engine, run, cell.arm, data["files"])
        proof = results.with_uploaded_services(
            proof, pages, cell=cell, hit_proof=engine.hit_proof_service
        )
    return f"upload {cell.arm} c={cell.tier} r{cell.repetition}", proof


def _service_pages(
    engine: Engine, run: Run, arm: str, files: Mapping[str, Any]
) -> list[results.ServicePages]:
    """The metrics pages sent for each side service the profile runs beside this arm with
    the run's values (`<service>_metrics_before`, `_after`); a page of any other is a 400."""
    arm_kind = run.spec.document.get("arms", {}).get(arm, "")
    metered = engine.metered_for(arm_kind, services.upload_run_values(run))
    expected = {f"{s.name}_metrics_{m}" for s in metered for m in ("before", "after")}
    for name in files:
        if SERVICE_PAGE.fullmatch(name) and name not in expected:
            raise ServiceError(
                f"no side service with metrics runs by that name beside arm {arm} in profile "
                f"{run.profile_name} with this run's parameters",
                field=name,
            )
        if name in expected and files[name].size > MAX_UPLOAD_BYTES:
            raise ServiceError("larger than 64 MiB", field=name)
    return [
        results.ServicePages(
            service.name,
            str(service.metrics_tool),
            _named_if_given(files.get(f"{service.name}_metrics_before")),
            _named_if_given(files.get(f"{service.name}_metrics_after")),
        )
        for service in metered
    ]


def _probe(data: dict) -> tuple[str, results.Proof]:
    content, source = _named(data["file"])
    proof = results.probe_proof(data["probe"], content, source=source, required=True)
    return f"upload probe {data['probe']}", proof


def _answers(data: dict) -> tuple[str, results.Proof]:
    content, source = _named(data["file"])
    proof = results.answers_proof(data["arm"], content, source=source)
    return f"upload answers {data['arm']}", proof


def _health(data: dict) -> tuple[str, results.Proof]:
    return "upload offload server health", results.health_proof(data["seconds"])


def _named(upload) -> results.NamedFile:
    return upload.read(), upload.name


def _named_if_given(upload) -> results.NamedFile | None:
    return None if upload is None else _named(upload)
