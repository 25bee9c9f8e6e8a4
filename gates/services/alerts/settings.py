"""Who hears of an engagement: its switchable events and extra addresses, each person's muted
events, and its webhook endpoints (URL checked against the SSRF rules, secret encrypted)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from gates.alerts import webhooks
from gates.alerts.events import SWITCHABLE
from gates.errors import NotAllowedError, ServiceError
from gates.models import AlertPreference, AlertSettings, Engagement, WebhookEndpoint
from gates.services.audit import Actor, audit_record
from gates.services.hosts.access import keyring
from gates.tenancy import Viewer

MAX_ADDRESSES = 20


def webhook_rules() -> webhooks.UrlRules:
    return webhooks.UrlRules(
        allow_http=settings.DEBUG, allow_private=settings.TOLLGATE_WEBHOOK_ALLOW_PRIVATE
    )


def engagement_alert_settings_save(
    *,
    actor: Actor,
    viewer: Viewer,
    engagement: Engagement,
    disabled_events: list[str],
    extra_emails: list[str],
    escalation_emails: list[str],
) -> AlertSettings:
    _require_configure(viewer)
    values = {
        "disabled_events": _switchable(disabled_events, "disabled_events"),
        "extra_emails": _addresses(extra_emails, "extra_emails"),
        "escalation_emails": _addresses(escalation_emails, "escalation_emails"),
    }
    with transaction.atomic():
        found, _ = AlertSettings.objects.update_or_create(engagement=engagement, defaults=values)
        audit_record(
            actor=actor,
            action="alerts.configure",
            target=engagement,
            organization_id=engagement.organization_id,
            detail=values,
        )
    return found


def alert_preference_save(*, user, muted_events: list[str]) -> AlertPreference:
    muted = _switchable(muted_events, "muted_events")
    preference, _ = AlertPreference.objects.update_or_create(
        user=user, defaults={"muted_events": muted}
    )
    return preference


def webhook_create(
    *, actor: Actor, viewer: Viewer, engagement: Engagement, url: str, fmt: str, secret: str = ""
) -> tuple[WebhookEndpoint, str]:
    """Save an endpoint; returns it and its secret, shown once (stored only encrypted)."""
    _require_configure(viewer)
    if fmt not in WebhookEndpoint.Format.values:
        raise ServiceError(f"unknown webhook format {fmt!r}", field="format")
    try:
        webhooks.check_url(url.strip(), webhook_rules())
    except webhooks.WebhookRefusedError as error:
        raise ServiceError(str(error), field="url") from error
    # PagerDuty's routing key is given by PagerDuty; other receivers get a fresh secret.
    secret = secret.strip() or secrets.token_urlsafe(32)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            engagement=engagement, url=url.strip(), format=fmt, secret_ciphertext=b""
        )
        endpoint.secret_ciphertext = keyring().encrypt(
            secret.encode(), associated_data=_aad(endpoint)
        )
        endpoint.save(update_fields=["secret_ciphertext"])
        audit_record(
            actor=actor,
            action="webhook.create",
            target=endpoint,
            organization_id=engagement.organization_id,
            detail={"url": endpoint.url, "format": fmt},
        )
    return endpoint, secret


def webhook_secret(endpoint: WebhookEndpoint) -> bytes:
    """The decrypted secret, for signing one delivery; raises CryptoError if it was tampered."""
    return keyring().decrypt(bytes(endpoint.secret_ciphertext), associated_data=_aad(endpoint))


def _aad(endpoint: WebhookEndpoint) -> bytes:
    # Bound to the row: a secret copied to another engagement's endpoint will not decrypt.
    return f"tollgate:webhook:engagement={endpoint.engagement_id}:id={endpoint.pk}".encode()


def _require_configure(viewer: Viewer) -> None:
    if not viewer.can("alert.configure"):
        raise NotAllowedError("you may not change this engagement's alerts")


def _switchable(events: list[str], field: str) -> list[str]:
    unknown = sorted(set(events) - set(SWITCHABLE))
    if unknown:
        raise ServiceError(f"not a switchable event: {', '.join(unknown)}", field=field)
    return sorted(set(events))


def _addresses(emails: list[str], field: str) -> list[str]:
    cleaned = sorted({email.strip() for email in emails if email.strip()})
    if len(cleaned) > MAX_ADDRESSES:
        raise ServiceError(f"at most {MAX_ADDRESSES} addresses", field=field)
    for email in cleaned:
        try:
            validate_email(email)
        except ValidationError as error:
            raise ServiceError(f"{email!r} is not an email address", field=field) from error
    return cleaned
