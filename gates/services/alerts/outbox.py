"""The alert outbox: one row per event and idempotency key, written in the transaction of what
caused it; a task delivers it (gates/services/alerts/delivery.py). Who hears of it is decided
here, once, when the row is written."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from gates.alerts import content
from gates.alerts.events import event_kind, webhook_key
from gates.alerts.links import ack_url
from gates.models import (
    Alert,
    AlertPreference,
    AlertSettings,
    Decision,
    Engagement,
    Gate,
    Membership,
    Run,
)
from gates.services import pokes

# Delivery lives in alert_delivery.py; re-exported so `from gates.services.alerts.outbox import
# alert_deliver` keeps working for the callers written before the split.
from gates.services.alerts.delivery import alert_claim_due, alert_deliver

__all__ = ["alert_claim_due", "alert_deliver", "alert_enqueue", "alert_recipients"]


def alert_recipients(
    engagement: Engagement | None, *, event: str | None = None, party: str | None = None
) -> list[str]:
    """The customer's own members and addresses, vendor staff and on-call; never another
    customer. With `party`, only that side ("customer" or "vendor"). Members who muted a
    switchable `event` are left out; without an engagement, on-call only."""
    emails: set[str] = set()
    if engagement is not None:
        emails |= _member_emails(engagement, event, party)
        if party in (None, "customer"):
            emails.update(engagement.organization.alert_emails)
            emails.update(_engagement_settings(engagement).extra_emails)
    if party in (None, "vendor"):
        emails.update(settings.TOLLGATE_ONCALL_EMAILS)
    return sorted(e for e in emails if e)


def _member_emails(engagement: Engagement, event: str | None, party: str | None) -> set[str]:
    customer = Q(organization_id=engagement.organization_id)
    vendor = Q(organization__kind="vendor")
    scope = {None: customer | vendor, "customer": customer, "vendor": vendor}[party]
    members = Membership.objects.filter(scope, receives_alerts=True).select_related("user")
    emails = {m.user.email for m in members if m.user.email}
    if event is not None and event_kind(event).switchable:
        # Matched in Python, not with a JSON `__contains` lookup: SQLite (the demo's database)
        # has none, and an engagement has a handful of members.
        preferences = AlertPreference.objects.filter(user__email__in=emails).values_list(
            "user__email", "muted_events"
        )
        emails -= {email for email, muted in preferences if event in (muted or [])}
    return emails


def _engagement_settings(engagement: Engagement) -> AlertSettings:
    found = AlertSettings.objects.filter(engagement=engagement).first()
    return found or AlertSettings(engagement=engagement)


def alert_is_switched_off(engagement: Engagement | None, event: str) -> bool:
    if engagement is None or not event_kind(event).switchable:
        return False
    return event in _engagement_settings(engagement).disabled_events


def alert_enqueue(
    *,
    event: str,
    key: str,
    engagement: Engagement | None,
    subject: str,
    body: str = "",
    gate: Gate | None = None,
    run: Run | None = None,
    recipients: list[str] | None = None,
    context: dict | None = None,
    decision: Decision | None = None,
) -> Alert | None:
    """Create the outbox row once per key and poke the delivery task after commit.

    The message is `body`, or templates/alerts/messages/<event>.txt rendered with `context`
    when both exist; the layout around it (deciding clause, run outcome, links, acknowledge
    link) comes from the facts of `gate`, `run` and `decision`. To `recipients` when given,
    else to everyone alert_recipients names. None when the engagement switched the event off.
    """
    if alert_is_switched_off(engagement, event):
        return None
    existing = Alert.objects.filter(idempotency_key=key).first()
    if existing is not None:
        return existing
    critical = event_kind(event).critical
    facts = content.alert_facts(
        event=event, engagement=engagement, gate=gate, run=run, decision=decision
    )
    message = body
    if context is not None:
        message = content.message_text(event, {**context, "facts": facts}) or body
    bodies = content.render_bodies(
        message=message, facts=facts, ack_url=ack_url(key) if critical else None
    )
    with transaction.atomic():
        alert, created = Alert.objects.get_or_create(
            idempotency_key=key,
            defaults={
                "event": event,
                "critical": critical,
                "engagement": engagement,
                "gate": gate,
                "run": run,
                "recipients": (
                    alert_recipients(engagement, event=event) if recipients is None else recipients
                ),
                "subject": content.redact(subject)[:200],
                "body": bodies.text,
                "html_body": bodies.html,
                "facts": facts,
            },
        )
        if created:
            pokes.poke_on_commit(pokes.DELIVER_ALERT, alert.pk)
            _enqueue_webhooks(alert)
    return alert


def _enqueue_webhooks(root: Alert) -> None:
    if root.engagement_id is None:
        return
    for endpoint in root.engagement.webhooks.filter(active=True):
        copy = Alert.objects.create(
            parent=root,
            channel=Alert.Channel.WEBHOOK,
            webhook=endpoint,
            event=root.event,
            critical=root.critical,
            engagement=root.engagement,
            gate=root.gate,
            run=root.run,
            idempotency_key=webhook_key(root.idempotency_key, endpoint.pk),
            subject=root.subject,
            body="",
            facts=root.facts,
        )
        pokes.poke_on_commit(pokes.DELIVER_ALERT, copy.pk)
