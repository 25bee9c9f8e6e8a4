"""Who hears about an engagement and how: its alert settings, each person's muted events,
and its webhook endpoints (the HMAC secret encrypted at rest)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AlertSettings(models.Model):
    """Per engagement: which switchable events are on, and who else hears about it."""

    engagement = models.OneToOneField(
        "gates.Engagement", on_delete=models.CASCADE, related_name="alert_settings"
    )
    # Switchable event names (gates.alerts.events.SWITCHABLE) turned off for this engagement.
    disabled_events = models.JSONField(default=list, blank=True)
    extra_emails = models.JSONField(default=list, blank=True)
    # Escalation re-sends an unacknowledged critical alert to the first list plus these.
    escalation_emails = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"alert settings of {self.engagement}"


class AlertPreference(models.Model):
    """One person's opt-outs: switchable events they do not want mailed."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_preference"
    )
    muted_events = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"alert preferences of {self.user}"


class WebhookEndpoint(models.Model):
    """An HTTPS receiver of an engagement's alerts, checked against SSRF rules when saved."""

    class Format(models.TextChoices):
        TOLLGATE = "tollgate", "Tollgate JSON"
        SLACK = "slack", "Slack incoming webhook"
        PAGERDUTY = "pagerduty", "PagerDuty Events API v2"

    engagement = models.ForeignKey(
        "gates.Engagement", on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=500)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.TOLLGATE)
    # AES-256-GCM, bound to the endpoint's row (gates.crypto): signs the body; for PagerDuty
    # it is also the routing key.
    secret_ciphertext = models.BinaryField(editable=False)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"{self.format} webhook of {self.engagement}"
