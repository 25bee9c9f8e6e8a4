"""Acknowledging alerts and escalating the critical ones nobody acknowledged: each round is a
row of its own (key `<root>#escalation:<n>`), so a beat that runs twice makes it once."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gates.alerts.events import escalation_key
from gates.alerts.links import AckLinkError, ack_key
from gates.models import Alert, AlertSettings
from gates.services import pokes
from gates.services.audit import Actor, audit_record


def alert_acknowledge(*, actor: Actor, alert: Alert) -> bool:
    """Acknowledge a root alert (ends its escalation); False if it already was. Audited."""
    with transaction.atomic():
        root = Alert.objects.select_for_update().get(pk=alert.parent_id or alert.pk)
        if root.acked_at is not None:
            return False
        root.acked_at = timezone.now()
        root.acked_by = actor.user
        root.save(update_fields=["acked_at", "acked_by"])
        audit_record(
            actor=actor,
            action="alert.ack",
            target=root,
            organization_id=root.engagement.organization_id if root.engagement else None,
            detail={"event": root.event, "subject": root.subject, "via": actor.label},
        )
    return True


def alert_acknowledge_link(*, actor: Actor, token: str) -> Alert:
    """Acknowledge through a signed link: once; an expired or tampered one raises AckLinkError."""
    alert = Alert.objects.filter(idempotency_key=ack_key(token), parent__isnull=True).first()
    if alert is None:
        raise AckLinkError("this acknowledge link is not valid")
    if not alert_acknowledge(actor=actor, alert=alert):
        raise AckLinkError("this alert was already acknowledged; the link works once")
    alert.refresh_from_db()
    return alert


def alerts_escalate(*, now: datetime | None = None) -> list[int]:
    """Queue the next round of every critical alert unacknowledged for the escalation delay,
    up to TOLLGATE_ESCALATION_MAX rounds; returns the ids of the rounds it queued."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.TOLLGATE_ESCALATE_AFTER_S)
    roots = Alert.objects.filter(
        parent__isnull=True,
        channel=Alert.Channel.EMAIL,
        critical=True,
        acked_at__isnull=True,
        delivered_at__lte=cutoff,
    ).select_related("engagement")
    queued = []
    for root in roots:
        rounds = root.followups.filter(level__gt=0).order_by("-level")
        last = rounds.first()
        if last is not None and (
            last.level >= settings.TOLLGATE_ESCALATION_MAX or last.created_at > cutoff
        ):
            continue
        escalation = _escalation_round(root, (last.level if last else 0) + 1)
        if escalation is not None:
            queued.append(escalation.pk)
    return queued


def _escalation_round(root: Alert, level: int) -> Alert | None:
    with transaction.atomic():
        alert, created = Alert.objects.get_or_create(
            idempotency_key=escalation_key(root.idempotency_key, level),
            defaults={
                "parent": root,
                "level": level,
                "event": root.event,
                "critical": True,
                "engagement": root.engagement,
                "gate": root.gate,
                "run": root.run,
                "recipients": escalation_recipients(root),
                "subject": _escalation_subject(root.subject, level),
                "body": root.body,
                "html_body": root.html_body,
                "facts": root.facts,
            },
        )
        if created:
            pokes.poke_on_commit(pokes.DELIVER_ALERT, alert.pk)
    return alert if created else None


def escalation_recipients(root: Alert) -> list[str]:
    """The first list, widened by the engagement's and the site's escalation addresses."""
    wider = set(root.recipients) | set(settings.TOLLGATE_ESCALATION_EMAILS)
    found = AlertSettings.objects.filter(engagement_id=root.engagement_id).first()
    if found is not None:
        wider |= set(found.escalation_emails)
    return sorted(wider)


def _escalation_subject(subject: str, level: int) -> str:
    prefix = f"[unacknowledged, {level} of {settings.TOLLGATE_ESCALATION_MAX}] "
    return (prefix + subject)[:200]
