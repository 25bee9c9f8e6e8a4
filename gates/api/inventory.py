"""REST v1: an engagement's accepted host inventory and the amendments both parties sign.
HTTP only; gates.services.contract.inventory does the writing."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.contract import DIGEST_PATTERN, _object_body, _username
from gates.api.rest.idempotency import idempotent
from gates.errors import NotAllowedError, ServiceError
from gates.models import Engagement, InventoryAmendment, Run
from gates.services.contract.inventory import g1_inventory, inventory_amendment_in_force
from gates.tenancy import get_visible_or_404, viewer_for_request
from runners.contract import inventory_differences


def amendment_view(amendment: InventoryAmendment, against: dict | None) -> dict:
    """An amendment, its signatures, who has yet to sign, and what it changes from `against`."""
    signatures = [s for s in amendment.signatures.all() if s.digest == amendment.digest]
    signed = {s.party for s in signatures}
    return {
        "id": amendment.pk,
        "digest": amendment.digest,
        "inventory": amendment.inventory,
        "reason": amendment.reason,
        "source_run": amendment.source_run_id,
        "proposed_by": _username(amendment.proposed_by),
        "created_at": amendment.created_at,
        "in_force": amendment.in_force,
        "changes": inventory_differences(against or {}, amendment.inventory),
        "signatures": [
            {
                "party": s.party,
                "digest": s.digest,
                "signed_by": _username(s.signed_by),
                "signed_at": s.signed_at,
                "key_fingerprint": s.key.fingerprint if s.key else None,
                "ssh_signature": s.ssh_signature,
            }
            for s in signatures
        ],
        "awaiting": [party for party in ("vendor", "customer") if party not in signed],
    }


def inventory_view(engagement: Engagement) -> dict:
    """What runs are held to now, where it came from, and the amendment awaiting signatures."""
    in_force = inventory_amendment_in_force(engagement)
    accepted = in_force.inventory if in_force else g1_inventory(engagement)
    pending = services.inventory_amendment_pending(engagement)
    return {
        "engagement": engagement.pk,
        "accepted": accepted,
        "source": "amendment" if in_force else ("G1" if accepted else None),
        "in_force": amendment_view(in_force, g1_inventory(engagement)) if in_force else None,
        "proposed": amendment_view(pending, accepted) if pending else None,
    }


class EngagementInventoryApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        engagement = get_visible_or_404(Engagement, viewer_for_request(request), pk=pk)
        return Response(inventory_view(engagement))


class AmendInput(serializers.Serializer):
    run = serializers.IntegerField(
        min_value=1, help_text="The run whose host check found the changed host (invalid)."
    )
    reason = serializers.CharField(max_length=4000, help_text="Why the host changed.")


class InventoryAmendApi(APIView):
    @extend_schema(
        request=AmendInput, responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT}
    )
    @idempotent
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        engagement = get_visible_or_404(Engagement, viewer, pk=pk)
        if not viewer.is_vendor or not viewer.can("spec.edit"):
            raise NotAllowedError("only vendor staff may propose an amended inventory")
        data = AmendInput(data=_object_body(request.data, "run"))
        data.is_valid(raise_exception=True)
        run = Run.objects.filter(pk=data.validated_data["run"], gate__engagement=engagement).first()
        if run is None:
            raise ServiceError("no such run in this engagement", field="run")
        _, created = services.inventory_amendment_propose(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            reason=data.validated_data["reason"],
        )
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(inventory_view(engagement), status=answer)


class SignInput(serializers.Serializer):
    class Meta:
        ref_name = "InventorySign"

    amendment = serializers.IntegerField(min_value=1, help_text="The amendment you read and sign.")
    digest = serializers.RegexField(
        DIGEST_PATTERN, required=False, help_text="Its SHA-256: the signature is bound to it."
    )
    ssh_signature = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=4000,
        help_text="Optional: `ssh-keygen -Y sign -n tollgate-spec` over the digest, armored.",
    )


class InventorySignApi(APIView):
    @extend_schema(request=SignInput, responses=OpenApiTypes.OBJECT)
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        engagement = get_visible_or_404(Engagement, viewer, pk=pk)
        if viewer.signing_party is None:
            raise NotAllowedError("only a vendor admin or a customer owner may sign an inventory")
        data = SignInput(data=_object_body(request.data, "amendment"))
        data.is_valid(raise_exception=True)
        amendment = engagement.inventory_amendments.filter(
            pk=data.validated_data["amendment"]
        ).first()
        if amendment is None:
            raise ServiceError("no such inventory amendment on this engagement", field="amendment")
        services.inventory_amendment_sign(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            amendment=amendment,
            digest=data.validated_data.get("digest"),
            ssh_signature=data.validated_data.get("ssh_signature", ""),
        )
        return Response(inventory_view(engagement))
