"""Alerts: the outbox (one row per event key) and who hears about an engagement and how: its alert
settings, each person's muted events,
and its webhook endpoints (the HMAC secret encrypted at rest)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from gates.models.choices import user_reference


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


class Alert(models.Model):
    """An outbox row: one per event and idempotency key, delivered by a task with retries.

    The first row of an event is its root; escalations and webhook copies are rows of their
    own (own key, attempts, backoff) pointing at it, and acknowledging the root ends them all.
    """

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    gate = models.ForeignKey(
        "gates.Gate", on_delete=models.PROTECT, null=True, blank=True, related_name="alerts"
    )
    engagement = models.ForeignKey(
        "gates.Engagement",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="alerts",
    )
    run = models.ForeignKey(
        "gates.Run", on_delete=models.PROTECT, null=True, blank=True, related_name="alerts"
    )
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="followups"
    )
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.EMAIL)
    webhook = models.ForeignKey(
        "gates.WebhookEndpoint",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="alerts",
    )
    event = models.CharField(max_length=40)
    critical = models.BooleanField(default=False)
    # 0 for the first sending; n for the n-th escalation.
    level = models.PositiveSmallIntegerField(default=0)
    idempotency_key = models.CharField(max_length=200, unique=True)
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=200)
    body = models.TextField()
    html_body = models.TextField(blank=True)
    # The machine-readable facts the webhook body carries (no secret, this engagement only).
    facts = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    acked_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["delivered_at", "next_attempt_at"]),
            models.Index(fields=["critical", "acked_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.event}: {self.subject}"
