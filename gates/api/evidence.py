"""REST v1: a gate's evidence bundle (its latest decision, signed), the parties' co-signatures
over it, and the server's public signing keys. HTTP only; gates.evidence.store does the work."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiTypes, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import PAGE_PARAMETERS, page_response, page_schema
from gates.errors import NotAllowedError, NotFoundError
from gates.evidence import store
from gates.models import Decision, EvidenceKey, Gate, Run
from gates.services.audit import Actor
from gates.tenancy import get_visible_or_404, viewer_for_request

ZIP = "application/zip"


class EvidenceKeySerializer(serializers.ModelSerializer):
    valid_now = serializers.SerializerMethodField()

    class Meta:
        model = EvidenceKey
        fields = [
            "fingerprint",
            "public_key",
            "public_pem",
            "source",
            "not_before",
            "not_after",
            "retired_at",
            "valid_now",
        ]

    def get_valid_now(self, key) -> bool:
        now = timezone.now()
        return (
            key.retired_at is None
            and key.not_before <= now
            and (key.not_after is None or key.not_after > now)
        )


class CosignatureInput(serializers.Serializer):
    ssh_signature = serializers.CharField(
        max_length=4000,
        help_text="`ssh-keygen -Y sign -n tollgate-evidence` over the bundle's to-cosign.pae.",
    )


def latest_decision(gate: Gate) -> Decision:
    decision = gate.decisions.select_related("spec", "gate__engagement").first()
    if decision is None:
        raise NotFoundError(f"gate {gate.pk} has no decision yet: nothing to give evidence of")
    return decision


class GateEvidenceApi(APIView):
    @extend_schema(responses={(200, ZIP): OpenApiTypes.BINARY})
    def get(self, request, pk: int):
        gate = get_visible_or_404(Gate, viewer_for_request(request), pk=pk)
        decision = latest_decision(gate)
        data, digest = store.bundle_for_decision(decision)
        name = f"tollgate-{gate.kind.lower()}-gate{gate.pk}-decision{decision.pk}.zip"
        return _zip_response(request, data, digest, name)


def _zip_response(request, data: bytes, digest: str, name: str) -> HttpResponse:
    etag = f'"{digest}"'
    if request.headers.get("If-None-Match") == etag:
        return HttpResponse(status=304, headers={"ETag": etag})
    return HttpResponse(
        data,
        content_type=ZIP,
        headers={"ETag": etag, "Content-Disposition": f'attachment; filename="{name}"'},
    )


class RunEvidenceApi(APIView):
    @extend_schema(responses={(200, ZIP): OpenApiTypes.BINARY})
    def get(self, request, pk: int):
        run = get_visible_or_404(
            Run.objects.select_related("gate", "spec"), viewer_for_request(request), pk=pk
        )
        data, digest = store.bundle_for_run(run)
        name = f"tollgate-{run.gate.kind.lower()}-gate{run.gate_id}-run{run.attempt}.zip"
        return _zip_response(request, data, digest, name)


class EvidenceSignaturesApi(APIView):
    @extend_schema(
        request=CosignatureInput,
        responses={
            201: inline_serializer(
                "Cosignature",
                {
                    "party": serializers.CharField(),
                    "keyid": serializers.CharField(),
                    "decision": serializers.IntegerField(),
                },
            )
        },
    )
    @idempotent
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        gate = get_visible_or_404(Gate, viewer, pk=pk)
        if viewer.signing_party is None:
            raise NotAllowedError("only a customer owner or a vendor admin co-signs evidence")
        data = CosignatureInput(data=request.data if isinstance(request.data, dict) else {})
        data.is_valid(raise_exception=True)
        decision = latest_decision(gate)
        row = store.evidence_cosign(
            actor=Actor.from_request(request),
            viewer=viewer,
            decision=decision,
            ssh_signature=data.validated_data["ssh_signature"],
        )
        body = {"party": row.party, "keyid": row.key.fingerprint, "decision": decision.pk}
        return Response(body, status=status.HTTP_201_CREATED)


class EvidenceKeysApi(APIView):
    @extend_schema(
        responses=page_schema("EvidenceKeyPage", EvidenceKeySerializer),
        parameters=PAGE_PARAMETERS,
    )
    def get(self, request):
        viewer_for_request(request)  # any signed-in caller: public keys are not tenant data
        keys = EvidenceKey.objects.order_by("-not_before", "-id")
        return page_response(request, self, keys, EvidenceKeySerializer)
