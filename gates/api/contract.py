"""REST v1: a gate's spec versions, their signatures, proposals and stop-loss resets, and the
signers' own Ed25519 keys. HTTP only; gates.services.contract.specs does the writing."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import PAGE_PARAMETERS, page_response, page_schema
from gates.errors import NotAllowedError, ServiceError
from gates.models import Gate, GateSpec, PartyKey, SpecSignature
from gates.selectors import gate_spec_in_force, gate_spec_proposed, spec_changes_from_force
from gates.specs.words import change_words
from gates.tenancy import get_visible_or_404, viewer_for_request

DIGEST_PATTERN = r"^[0-9a-f]{64}$"


class SignatureSerializer(serializers.ModelSerializer):
    signed_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    key_fingerprint = serializers.CharField(source="key.fingerprint", allow_null=True, default=None)

    class Meta:
        model = SpecSignature
        fields = [
            "party",
            "digest",
            "signed_by",
            "signed_at",
            "key_fingerprint",
            "ssh_signature",
            "acknowledged_power",
        ]


class SpecBriefSerializer(serializers.ModelSerializer):
    signatures = serializers.SerializerMethodField()

    class Meta:
        model = GateSpec
        fields = ["version", "digest", "created_at", "signatures"]

    def get_signatures(self, spec) -> list[dict]:
        rows = spec.signatures.filter(digest=spec.digest).select_related("signed_by", "key")
        return SignatureSerializer(rows, many=True).data


class SpecSerializer(SpecBriefSerializer):
    gate = serializers.IntegerField(source="gate_id")
    frozen = serializers.BooleanField(source="is_frozen")
    signed_by_both = serializers.BooleanField(source="in_force")
    # The two parties' signatures in the earlier flat shape, for clients that read it.
    vendor_signed_by = serializers.SerializerMethodField()
    vendor_signed_at = serializers.DateTimeField(read_only=True, allow_null=True)
    customer_signed_by = serializers.SerializerMethodField()
    customer_signed_at = serializers.DateTimeField(read_only=True, allow_null=True)

    class Meta:
        model = GateSpec
        fields = [
            "gate",
            "version",
            "document",
            "digest",
            "frozen",
            "signed_by_both",
            "created_at",
            "signatures",
            "vendor_signed_by",
            "vendor_signed_at",
            "customer_signed_by",
            "customer_signed_at",
        ]

    def get_vendor_signed_by(self, spec) -> str | None:
        return _username(spec.vendor_signed_by)

    def get_customer_signed_by(self, spec) -> str | None:
        return _username(spec.customer_signed_by)


def _username(user) -> str | None:
    return user.get_username() if user is not None else None


def spec_view(gate: Gate, spec: GateSpec) -> dict:
    """The latest version, the version in force, and the proposal with its diff."""
    data = dict(SpecSerializer(spec).data)
    in_force = gate_spec_in_force(gate)
    proposed = gate_spec_proposed(gate)
    data["in_force"] = SpecBriefSerializer(in_force).data if in_force else None
    if proposed is None:
        data["proposed"] = None
    else:
        signed = proposed.signed_parties
        data["proposed"] = {
            **SpecBriefSerializer(proposed).data,
            "changes": _changes(gate, in_force, proposed),
            "awaiting": [party for party in ("vendor", "customer") if party not in signed],
        }
    return data


def _changes(gate: Gate, in_force: GateSpec | None, proposed: GateSpec) -> list[dict]:
    """Each change with its words beside the path: "Free disk, at least: 500 GiB → 1 GiB"."""
    before = in_force.document if in_force else {}
    return [
        {**change.as_dict(), "words": str(change_words(change, before, proposed.document))}
        for change in spec_changes_from_force(gate, proposed)
    ]


def _spec_response(gate: Gate, spec: GateSpec, http_status: int = status.HTTP_200_OK) -> Response:
    # The digest is the version's entity tag: send it back in If-Match to edit safely.
    return Response(spec_view(gate, spec), status=http_status, headers={"ETag": f'"{spec.digest}"'})


class GateSpecApi(APIView):
    @extend_schema(responses=SpecSerializer)
    def get(self, request, pk: int):
        gate = get_visible_or_404(Gate, viewer_for_request(request), pk=pk)
        return _spec_response(gate, gate.current_spec)

    @extend_schema(
        request=inline_serializer("SpecDocument", {"document": serializers.JSONField()}),
        responses={200: SpecSerializer, 201: SpecSerializer},
    )
    def put(self, request, pk: int):
        viewer = viewer_for_request(request)
        gate = get_visible_or_404(Gate, viewer, pk=pk)
        if not viewer.can("spec.edit"):
            raise NotAllowedError("only vendor staff may change a spec")
        change = services.gate_spec_propose(
            actor=services.Actor.from_request(request),
            gate=gate,
            document=_document(request.data),
            if_match=request.headers.get("If-Match"),
        )
        created = status.HTTP_201_CREATED if change.created else status.HTTP_200_OK
        return _spec_response(gate, change.spec, created)


def _document(body: object) -> dict:
    """The spec from a PUT body: {"document": {...}} or the document itself, always an object."""
    if not isinstance(body, dict):
        raise ServiceError(
            f'the request body must be a JSON object (the spec, or {{"document": spec}}), '
            f"not {_json_kind(body)}",
            field="(body)",
        )
    document = body.get("document", body)
    if not isinstance(document, dict):
        raise ServiceError(
            f"document must be a JSON object, not {_json_kind(document)}", field="document"
        )
    return document


def _json_kind(value: object) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else "that")


class SignInput(serializers.Serializer):
    class Meta:
        ref_name = "SpecSign"

    version = serializers.IntegerField(min_value=1, help_text="The version you read and sign.")
    digest = serializers.RegexField(
        DIGEST_PATTERN, required=False, help_text="Its SHA-256: the signature is bound to it."
    )
    ssh_signature = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=4000,
        help_text="Optional: `ssh-keygen -Y sign -n tollgate-spec` over the digest, armored.",
    )
    acknowledge_underpowered = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Sign a G3 spec that requires power although its gate cannot reach it at "
        "the known noise (the refusal names its power and what would make it decisive); the "
        "acknowledgement is kept with the signature and shown wherever the verdict is.",
    )


def _object_body(body: object, field: str) -> dict:
    if not isinstance(body, dict) or not body:
        raise ServiceError(f"send a JSON object with {field}", field=field)
    return body


class GateSpecSignApi(APIView):
    @extend_schema(request=SignInput, responses=SpecSerializer)
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        gate = get_visible_or_404(Gate, viewer, pk=pk)
        data = SignInput(data=_object_body(request.data, "version"))
        data.is_valid(raise_exception=True)
        version = data.validated_data["version"]
        spec = gate.specs.filter(version=version).first()
        if spec is None:
            return Response(
                {"error": "not_found", "detail": f"no spec version {version}", "field": "version"},
                status=status.HTTP_404_NOT_FOUND,
            )
        spec = services.gate_spec_sign(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            spec=spec,
            digest=data.validated_data.get("digest"),
            ssh_signature=data.validated_data.get("ssh_signature", ""),
            acknowledge_underpowered=data.validated_data["acknowledge_underpowered"],
        )
        return _spec_response(gate, spec)


class GateResetApi(APIView):
    @extend_schema(
        request=inline_serializer("StopLossReset", {"reason": serializers.CharField()}),
        responses=inline_serializer(
            "StopLossResetState",
            {
                "reason": serializers.CharField(),
                # Null until both parties signed (effective_at) or until that party signed.
                "vendor_signed_at": serializers.DateTimeField(allow_null=True),
                "customer_signed_at": serializers.DateTimeField(allow_null=True),
                "effective_at": serializers.DateTimeField(allow_null=True),
            },
        ),
    )
    def post(self, request, pk: int):
        viewer = viewer_for_request(request)
        gate = get_visible_or_404(Gate, viewer, pk=pk)
        body = request.data if isinstance(request.data, dict) else {}
        reason = body.get("reason", "")
        if not isinstance(reason, str):
            raise ServiceError("reason must be text", field="reason")
        reset = services.stop_loss_reset_sign(
            actor=services.Actor.from_request(request), viewer=viewer, gate=gate, reason=reason
        )
        return Response(
            {
                "reason": reset.reason,
                "vendor_signed_at": reset.vendor_signed_at,
                "customer_signed_at": reset.customer_signed_at,
                "effective_at": reset.effective_at,
            }
        )


class PartyKeySerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = PartyKey
        fields = ["id", "user", "public_key", "fingerprint", "created_at", "revoked_at"]


class PartyKeyApi(APIView):
    @extend_schema(
        responses=page_schema("PartyKeyPage", PartyKeySerializer), parameters=PAGE_PARAMETERS
    )
    def get(self, request):
        viewer = viewer_for_request(request)
        keys = PartyKey.objects.filter(organization_id__in=viewer.organization_ids)
        rows = keys.select_related("user").order_by("organization", "-created_at", "-id")
        return page_response(request, self, rows, PartyKeySerializer)

    @extend_schema(
        request=inline_serializer("PartyKeyCreate", {"public_key": serializers.CharField()}),
        responses={201: PartyKeySerializer},
    )
    @idempotent
    def post(self, request):
        body = _object_body(request.data, "public_key")
        public_key = body.get("public_key")
        if not isinstance(public_key, str):
            raise ServiceError("public_key must be an OpenSSH public key line", field="public_key")
        key = services.party_key_register(
            actor=services.Actor.from_request(request),
            viewer=viewer_for_request(request),
            public_key=public_key,
        )
        return Response(PartyKeySerializer(key).data, status=status.HTTP_201_CREATED)
