"""REST v1: hosts (vendor staff only). Key material is write-only: never returned."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import PAGE_PARAMETERS, page_response, page_schema
from gates.errors import NotAllowedError, NotFoundError
from gates.models import Host, Organization, Profile
from gates.tenancy import get_visible_or_404, viewer_for_request, visible


class RunProfileSerializer(serializers.Serializer):
    """The profile a run used, as the run kept it at its start (a later edit of the Profile
    row, or the host pointed at another, leaves it as it was): what a run's API entry shows."""

    name = serializers.CharField(help_text="The profile's name when the run started.")
    digest = serializers.CharField(
        help_text="SHA-256 of the run's profile snapshot (name, commands, parameters) as "
        "canonical JSON; run.json in the run's evidence holds the snapshot itself."
    )
    short_digest = serializers.CharField(help_text="Its first 12 hex digits, as pages show it.")


class HostSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    profile = serializers.SlugRelatedField(slug_field="name", read_only=True)
    has_stored_credential = serializers.BooleanField(read_only=True)
    leased_by_run = serializers.IntegerField(source="lease_run_id", allow_null=True)

    class Meta:
        model = Host
        fields = [
            "id",
            "organization",
            "name",
            "transport",
            "address",
            "port",
            "username",
            "host_key",
            "host_key_fingerprint",
            "key_file_path",
            "has_stored_credential",
            "profile",
            "labels",
            "leased_by_run",
            "created_at",
        ]


def _require_host_rights(request):
    viewer = viewer_for_request(request)
    if not viewer.can("host.manage"):
        raise NotAllowedError("hosts are managed by vendor staff")
    return viewer


class HostListApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "HostCreate"

        organization = serializers.SlugField()
        name = serializers.SlugField(max_length=80)
        profile = serializers.SlugField()
        transport = serializers.ChoiceField(choices=Host.Transport.choices, default="ssh")
        address = serializers.CharField(max_length=255, required=False, default="")
        port = serializers.IntegerField(min_value=1, max_value=65535, default=22)
        username = serializers.CharField(max_length=64, required=False, default="")
        host_key = serializers.CharField(required=False, default="")
        private_key = serializers.CharField(
            required=False, write_only=True, default=None, trim_whitespace=False
        )
        key_file_path = serializers.CharField(max_length=500, required=False, default="")
        labels = serializers.DictField(
            child=serializers.CharField(max_length=200), required=False, default=dict
        )

    @extend_schema(
        operation_id="v1_hosts_list",
        responses=page_schema("HostPage", HostSerializer),
        parameters=PAGE_PARAMETERS,
    )
    def get(self, request):
        viewer = _require_host_rights(request)
        hosts = visible(Host, viewer).select_related("organization", "profile").order_by("pk")
        return page_response(request, self, hosts, HostSerializer)

    @idempotent
    @extend_schema(request=InputSerializer, responses={201: HostSerializer})
    def post(self, request):
        viewer = _require_host_rights(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        organization = get_visible_or_404(Organization, viewer, slug=values.pop("organization"))
        profile = Profile.objects.filter(name=values.pop("profile")).first()
        if profile is None:
            raise NotFoundError("no such profile", field="profile")
        host = services.host_create(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            organization=organization,
            profile=profile,
            **values,
        )
        return Response(HostSerializer(host).data, status=status.HTTP_201_CREATED)


class HostDetailApi(APIView):
    @extend_schema(responses=HostSerializer)
    def get(self, request, pk: int):
        viewer = _require_host_rights(request)
        return Response(HostSerializer(get_visible_or_404(Host, viewer, pk=pk)).data)


class HostScanApi(APIView):
    """Step 1 of onboarding: read the key a host presents, for a person to confirm."""

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "HostScan"

        address = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
        port = serializers.IntegerField(min_value=1, max_value=65535, default=22)

    @extend_schema(
        request=InputSerializer,
        responses=inline_serializer(
            "HostScanResult",
            {"host_key": serializers.CharField(), "fingerprint": serializers.CharField()},
        ),
    )
    def post(self, request):
        viewer = _require_host_rights(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key_line, fingerprint = services.host_scan(viewer=viewer, **data.validated_data)
        return Response(
            {
                "host_key": key_line,
                "fingerprint": fingerprint,
                "next": "confirm the fingerprint with the host's owner, then pin "
                "host_key when registering the host",
            }
        )


class HostCheckApi(APIView):
    """Step 3 of onboarding: reachable, key, authentication, python3, the profile's tools."""

    @extend_schema(
        request=None,
        responses=inline_serializer(
            "HostCheckResult",
            {
                "ok": serializers.BooleanField(),
                "checks": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    def post(self, request, pk: int):
        viewer = _require_host_rights(request)
        host = get_visible_or_404(Host.objects.select_related("profile"), viewer, pk=pk)
        report = services.host_connection_check(
            actor=services.Actor.from_request(request), viewer=viewer, host=host
        )
        return Response(
            {
                "ok": report.ok,
                "checks": [
                    {"name": c.name, "ok": c.ok, "message": c.message} for c in report.checks
                ],
            }
        )
