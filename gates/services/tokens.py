"""API tokens for CI: created with the secret shown once, stored as a digest, revocable."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from gates.crypto import new_api_token
from gates.errors import NotAllowedError, ServiceError
from gates.models import ApiToken, Engagement, Organization
from gates.services.audit import Actor, audit_record
from gates.tenancy import Viewer


def api_token_create(
    *,
    actor: Actor,
    viewer: Viewer,
    organization: Organization,
    name: str,
    scopes: list[str],
    engagement: Engagement | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiToken, str]:
    """Return the token row and the secret, which is never stored or shown again."""
    if not viewer.can("token.manage") or organization.id not in viewer.organization_ids:
        raise NotAllowedError("you may not create tokens for this organization")
    unknown = sorted(set(scopes) - set(ApiToken.Scope.values))
    if unknown or not scopes:
        raise ServiceError(f"scopes must be among {ApiToken.Scope.values}", field="scopes")
    if expires_at is not None and expires_at <= timezone.now():
        raise ServiceError("the expiry must be in the future", field="expires_at")
    if viewer.token is not None:
        _check_within_minting_token(viewer.token, scopes, engagement, expires_at)
    if (
        engagement is not None
        and engagement.organization_id != organization.id
        and not organization.is_vendor
    ):
        raise ServiceError("the engagement belongs to another organization", field="engagement")
    if expires_at is not None and expires_at <= timezone.now():
        raise ServiceError("the expiry must lie in the future", field="expires_at")
    secret, prefix, digest = new_api_token()
    with transaction.atomic():
        token = ApiToken.objects.create(
            organization=organization,
            engagement=engagement,
            name=name,
            prefix=prefix,
            digest=digest,
            scopes=sorted(set(scopes)),
            created_by=actor.user,
            expires_at=expires_at,
        )
        audit_record(
            actor=actor,
            action="token.create",
            target=token,
            organization_id=organization.id,
            detail={"name": name, "scopes": token.scopes, "prefix": prefix},
        )
    return token, secret


def api_token_revoke(*, actor: Actor, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor,
            action="token.revoke",
            target=token,
            organization_id=token.organization_id,
            detail={"prefix": token.prefix},
        )
    return token


def _check_within_minting_token(
    minting: ApiToken,
    scopes: list[str],
    engagement: Engagement | None,
    expires_at: datetime | None,
) -> None:
    """A token that mints a token can only hand on what it holds itself: no wider scopes, no
    other engagement, no longer life. Otherwise a leaked `tokens` token would be a master key."""
    wider = sorted(set(scopes) - set(minting.scopes))
    if wider:
        raise NotAllowedError(f"this token may not grant scopes it lacks: {wider}")
    if minting.engagement_id is not None and (
        engagement is None or engagement.id != minting.engagement_id
    ):
        raise NotAllowedError("this token may only create tokens for its own engagement")
    if minting.expires_at is not None and (expires_at is None or expires_at > minting.expires_at):
        raise ServiceError(
            f"must expire by this token's own expiry, {minting.expires_at.isoformat()}",
            field="expires_at",
        )


def api_token_used(token: ApiToken, *, resolution: timedelta) -> None:
    """Note a token's last use, at most once per `resolution`: every API request would
    otherwise write its row (one conditional UPDATE, no read-modify-write race)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > resolution:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
