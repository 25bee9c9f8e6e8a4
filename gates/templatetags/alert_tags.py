"""`{% open_alerts engagement %}`: the engagement page's list of unacknowledged alerts, with an
acknowledge button for those who may (the engagement is already scoped by its view)."""

from __future__ import annotations

from django import template

from gates.models import Alert

register = template.Library()
SHOWN = 20


@register.inclusion_tag("alerts/_open_alerts.html", takes_context=True)
def open_alerts(context, engagement) -> dict:
    viewer = context.get("viewer")
    alerts = Alert.objects.filter(
        engagement=engagement, parent__isnull=True, acked_at__isnull=True
    ).order_by("-created_at")
    return {
        "alerts": list(alerts[:SHOWN]),
        "engagement": engagement,
        "can_ack": bool(viewer and viewer.can("alert.ack")),
        "csrf_token": context.get("csrf_token"),
    }
