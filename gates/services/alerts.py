"""The alert outbox: one row per event and idempotency key; a task delivers it by email."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from gates.models import Alert, Engagement, Gate, Membership, Run
from gates.services import pokes

MAX_DELIVERY_ATTEMPTS = 8
BACKOFF_BASE_S = 30
BACKOFF_MAX_S = 3600


def alert_recipients(engagement: Engagement, *, party: str | None = None) -> list[str]:
    """The customer's own members and aliases, vendor staff and on-call; never another customer.
    With `party`, only that side: "customer" (members and aliases) or "vendor" (staff)."""
    customer = Q(organization_id=engagement.organization_id)
    vendor = Q(organization__kind="vendor")
    scope = {None: customer | vendor, "customer": customer, "vendor": vendor}[party]
    members = Membership.objects.filter(receives_alerts=True).filter(scope)
    emails = {m.user.email for m in members.select_related("user") if m.user.email}
    if party in (None, "customer"):
        emails.update(engagement.organization.alert_emails)
    if party in (None, "vendor"):
        emails.update(settings.TOLLGATE_ONCALL_EMAILS)
    return sorted(e for e in emails if e)


def alert_enqueue(
    *,
    event: str,
    key: str,
    engagement: Engagement,
    subject: str,
    body: str,
    gate: Gate | None = None,
    run: Run | None = None,
    recipients: list[str] | None = None,
) -> Alert:
    """Create the outbox row once per key and poke the delivery task after commit; to
    `recipients` when given, else to everyone alert_recipients names."""
    alert, created = Alert.objects.get_or_create(
        idempotency_key=key,
        defaults={
            "event": event,
            "engagement": engagement,
            "gate": gate,
            "run": run,
            "recipients": alert_recipients(engagement) if recipients is None else recipients,
            "subject": subject[:200],
            "body": body + _footer(engagement),
        },
    )
    if created:
        pokes.poke_on_commit(pokes.DELIVER_ALERT, alert.pk)
    return alert


def alert_claim_due(*, limit: int = 20) -> list[int]:
    """Ids of alerts due for a delivery attempt."""
    due = Alert.objects.filter(
        delivered_at__isnull=True,
        attempts__lt=MAX_DELIVERY_ATTEMPTS,
        next_attempt_at__lte=timezone.now(),
    )
    return list(due.order_by("next_attempt_at").values_list("id", flat=True)[:limit])


def alert_deliver(*, alert_id: int) -> bool:
    """Try to send one alert; returns True once it is delivered. Safe to run twice."""
    with transaction.atomic():
        alert = (
            Alert.objects.select_for_update(skip_locked=True)
            .filter(pk=alert_id, delivered_at__isnull=True)
            .first()
        )
        if alert is None or alert.next_attempt_at > timezone.now():
            return False
        alert.attempts += 1
        try:
            _send(alert)
        except OSError as error:  # smtplib errors and timeouts are OSErrors
            alert.last_error = f"{type(error).__name__}: {error}"[:1000]
            delay = min(BACKOFF_BASE_S * 2 ** (alert.attempts - 1), BACKOFF_MAX_S)
            alert.next_attempt_at = timezone.now() + timedelta(seconds=delay)
            alert.save(update_fields=["attempts", "last_error", "next_attempt_at"])
            return False
        alert.delivered_at = timezone.now()
        alert.last_error = ""
        alert.save(update_fields=["attempts", "last_error", "delivered_at"])
        return True


def _send(alert: Alert) -> None:
    if not alert.recipients:
        return
    message = EmailMessage(
        subject=alert.subject,
        body=alert.body,
        to=alert.recipients,
        # A stable Message-ID: if a crash repeats a delivery, mail clients fold the duplicate.
        headers={"Message-ID": f"<alert-{_key_hash(alert.idempotency_key)}@tollgate>"},
    )
    message.send(fail_silently=False)


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _footer(engagement: Engagement) -> str:
    return f"\n--\nTollgate: {settings.SITE_URL}/engagements/{engagement.pk}/\n"
