"""Bearer-token authentication for CI: `Authorization: Bearer tg_<prefix>_<secret>`.

Tokens only ever travel in the header; a token in the query string is refused. Failed
attempts are counted per client address: past the limit every attempt is a 429 (audited once).
"""

from __future__ import annotations

import hmac
from datetime import timedelta

from django.conf import settings
from rest_framework import authentication, exceptions

from gates.api.rest import throttling
from gates.crypto import split_api_token, token_digest
from gates.models import ApiToken
from gates.services.audit import Actor, audit_record
from gates.services.tokens import api_token_used

# Writing last_used_at on every request would turn reads into writes; once a minute is enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        if "token" in request.query_params or "access_token" in request.query_params:
            raise exceptions.AuthenticationFailed("send the token in the Authorization header")
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        keyword, _, secret = header.partition(" ")
        if keyword != self.keyword:
            return None
        address = request.META.get("REMOTE_ADDR") or "-"
        if throttling.token_failures_exceeded(address):
            raise exceptions.Throttled(
                wait=settings.TOLLGATE_TOKEN_FAILURE_WINDOW_S,
                detail="too many failed token attempts",
            )
        try:
            token = self._token_for(secret.strip())
        except exceptions.AuthenticationFailed:
            self._failed(request, address)
            raise
        self._touch(token)
        return token.created_by, token

    def authenticate_header(self, request) -> str:
        return self.keyword

    def _token_for(self, secret: str) -> ApiToken:
        prefix = split_api_token(secret)
        token = (
            ApiToken.objects.select_related("organization", "created_by")
            .filter(prefix=prefix)
            .first()
            if prefix
            else None
        )
        if token is None or not hmac.compare_digest(token.digest, token_digest(secret)):
            raise exceptions.AuthenticationFailed("invalid token")
        if not token.is_usable() or not token.created_by.is_active:
            raise exceptions.AuthenticationFailed("token revoked or expired")
        return token

    def _failed(self, request, address: str) -> None:
        if throttling.token_failure_record(address) == settings.TOLLGATE_TOKEN_FAILURES_ALLOWED:
            audit_record(
                # The Django request: DRF's would authenticate again to tell the user.
                actor=Actor.from_request(request._request),
                action="token.failures_limited",
                detail={"failures": settings.TOLLGATE_TOKEN_FAILURES_ALLOWED, "ip": address},
            )

    def _touch(self, token: ApiToken) -> None:
        api_token_used(token, resolution=LAST_USED_RESOLUTION)
