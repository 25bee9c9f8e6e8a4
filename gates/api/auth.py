"""Bearer-token authentication for CI: `Authorization: Bearer tg_<prefix>_<secret>`.

Tokens only ever travel in the header; a token in the query string is refused.
"""

from __future__ import annotations

import hmac
from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from gates.crypto import split_api_token, token_digest
from gates.models import ApiToken

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
        token = self._token_for(secret.strip())
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

    def _touch(self, token: ApiToken) -> None:
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
