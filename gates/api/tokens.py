"""REST v1: API tokens of the caller's own organization, listed, created (the secret shown
once) and revoked. Managing tokens needs a session or a token with the `tokens` scope."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gates import services
from gates.api.rest.idempotency import idempotent
from gates.api.rest.pagination import PAGE_PARAMETERS, page_response, page_schema
from gates.errors import NotAllowedError, ServiceError
from gates.models import ApiToken, Engagement, Organization
from gates.tenancy import Viewer, manageable_tokens, viewer_for_request, visible


class TokenSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    engagement = serializers.IntegerField(source="engagement_id", allow_null=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "organization",
            "engagement",
            "scopes",
            "created_by",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
        ]


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret: shown in this response only.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class TokenListApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TokenCreate"

        name = serializers.CharField(max_length=100)
        scopes = serializers.ListField(
            child=serializers.ChoiceField(choices=ApiToken.Scope.choices), min_length=1
        )
        organization = serializers.SlugField(
            required=False, help_text="Needed only if you belong to several organizations."
        )
        engagement = serializers.IntegerField(required=False, allow_null=True, default=None)
        expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    @extend_schema(
        operation_id="v1_tokens_list",
        responses=page_schema("TokenPage", TokenSerializer),
        parameters=PAGE_PARAMETERS,
    )
    def get(self, request):
        tokens = _manageable(viewer_for_request(request)).select_related(
            "organization", "created_by"
        )
        return page_response(request, self, tokens.order_by("-created_at", "-pk"), TokenSerializer)

    @idempotent(sealed=True)
    @extend_schema(request=InputSerializer, responses={201: NewTokenSerializer})
    def post(self, request):
        viewer = viewer_for_request(request)
        _manageable(viewer)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        token, secret = services.api_token_create(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            organization=_organization(viewer, values.get("organization")),
            name=values["name"],
            scopes=values["scopes"],
            engagement=_engagement(viewer, values["engagement"]),
            expires_at=values["expires_at"],
        )
        token.token = secret
        return Response(NewTokenSerializer(token).data, status=status.HTTP_201_CREATED)


class TokenDetailApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int):
        viewer = viewer_for_request(request)
        token = _manageable(viewer).filter(pk=pk).first()
        if token is None:
            # Another organization's token, or none: the same answer, so ids leak nothing.
            return Response(
                {"error": "not_found", "detail": "not found"}, status=status.HTTP_404_NOT_FOUND
            )
        services.api_token_revoke(actor=services.Actor.from_request(request), token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _manageable(viewer: Viewer):
    if not viewer.can("token.manage"):
        raise NotAllowedError(
            "managing tokens needs a vendor admin, vendor engineer or customer owner, "
            "signed in or with a token that has the `tokens` scope"
        )
    return manageable_tokens(viewer)


def _organization(viewer: Viewer, slug: str | None) -> Organization:
    own = Organization.objects.filter(id__in=viewer.organization_ids)
    if slug is not None:
        own = own.filter(slug=slug)
    found = list(own[:2])
    if len(found) != 1:
        detail = "not one of your organizations" if slug else "you belong to several: name one"
        raise ServiceError(detail, field="organization")
    return found[0]


def _engagement(viewer: Viewer, engagement_id: int | None) -> Engagement | None:
    if engagement_id is None:
        return None
    engagement = visible(Engagement, viewer).filter(pk=engagement_id).first()
    if engagement is None:
        raise ServiceError("no such engagement visible to you", field="engagement")
    return engagement
