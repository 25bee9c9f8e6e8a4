"""REST v1: results uploaded from air-gapped hosts, read by the same adapters as fetched ones.

HTTP only: files are parsed by runners.adapters / runners.results (pure), stored by services.
"""

from __future__ import annotations

import json

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.runs import RunSerializer
from gates.errors import ServiceError
from gates.models import Run
from gates.tenancy import get_visible_or_404, viewer_for_request
from runners import adapters
from runners.results import probe_facts, probe_tool, server_facts

MAX_UPLOAD_BYTES = 64 * 1024 * 1024
KINDS = ("bench", "probe", "answers", "health")


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

    @extend_schema(request=UploadSerializer, responses={201: RunSerializer})
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        run = get_visible_or_404(Run.objects.select_related("spec", "host"), viewer, pk=pk)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = _read(data.validated_data)
        services.run_upload_record(
            actor=services.Actor.from_request(request), viewer=viewer, run=run, **upload
        )
        run.refresh_from_db()
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class RunDecideApi(APIView):
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


def _read(data: dict) -> dict:
    """What one upload proves: the files to keep, and the facts or measurement they give."""
    return {"bench": _bench, "probe": _probe, "answers": _answers, "health": _health}[data["kind"]](
        data
    )


def _bench(data: dict) -> dict:
    raw, label = data["file"].read(), f"upload/{data['arm']}-c{data['tier']}-r{data['repetition']}"
    result = _parse(raw, "vllm-bench", data["file"].name, "file")
    runs = [r for r in result["runs"] if r.get("max_concurrency") in (None, data["tier"])]
    if len(runs) != 1:
        raise ServiceError(
            f"{data['file'].name}: expected one run at concurrency "
            f"{data['tier']}, found {len(runs)}",
            field="file",
        )
    files = [(f"{label}/result.json", "vllm-bench", raw)]
    server = None
    if data.get("metrics_before") and data.get("metrics_after"):
        before, after = data["metrics_before"].read(), data["metrics_after"].read()
        server = server_facts(
            _parse(before, "vllm-metrics", "metrics_before", "metrics_before"),
            _parse(after, "vllm-metrics", "metrics_after", "metrics_after"),
        )
        files += [
            (f"{label}/metrics-before.txt", "vllm-metrics", before),
            (f"{label}/metrics-after.txt", "vllm-metrics", after),
        ]
    measurement = {
        "arm": data["arm"],
        "tier": data["tier"],
        "repetition": data["repetition"],
        "metrics": runs[0],
        "server": server,
        "artifact": files[0][0],
    }
    name = f"upload {data['arm']} c={data['tier']} r{data['repetition']}"
    return {"name": name, "files": files, "measurement": measurement}


def _probe(data: dict) -> dict:
    raw = data["file"].read()
    facts = probe_facts(data["probe"], raw.decode("utf-8", "replace"))
    if not facts:
        raise ServiceError(
            f"{data['file'].name}: not readable as {probe_tool(data['probe'])} "
            f"output for probe {data['probe']}",
            field="file",
        )
    label = f"upload/probes/{data['probe']}.txt"
    return {
        "name": f"upload probe {data['probe']}",
        "facts": facts,
        "files": [(label, probe_tool(data["probe"]), raw)],
    }


def _answers(data: dict) -> dict:
    raw = data["file"].read()
    try:
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        answers = [line["text"] if isinstance(line, dict) else str(line) for line in lines]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
        raise ServiceError(
            f"{data['file'].name}: expected JSON lines with a 'text' field ({error})", field="file"
        ) from error
    return {
        "name": f"upload answers {data['arm']}",
        "facts": {f"answers_{data['arm']}": answers},
        "files": [(f"upload/answers-{data['arm']}.jsonl", "completions", raw)],
    }


def _health(data: dict) -> dict:
    return {
        "name": "upload offload server health",
        "files": [],
        "facts": {"offload_healthy_after_s": data["seconds"]},
    }


def _parse(raw: bytes, tool: str, source: str, field: str) -> dict:
    try:
        return adapters.parse(raw, tool=tool, source=source)
    except adapters.AdapterError as error:
        raise ServiceError(str(error), field=field) from error
