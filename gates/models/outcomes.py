"""What gates end in: append-only decisions, and the alert outbox."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from gates.models.appendonly import AppendOnlyModel
from gates.models.choices import Verdict, user_reference


class Decision(AppendOnlyModel):
    """A verdict with every number it used. Never edited: a new decision supersedes."""

    class Kind(models.TextChoices):
        ENGINE = "engine", "decided by the engine"
        WAIVER = "waiver", "waived by a vendor admin"
        STOP = "stop", "engagement stopped at stop-loss review"

    gate = models.ForeignKey("gates.Gate", on_delete=models.PROTECT, related_name="decisions")
    spec = models.ForeignKey("gates.GateSpec", on_delete=models.PROTECT, related_name="+")
    runs = models.ManyToManyField("gates.Run", related_name="decisions", blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ENGINE)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    # Decided on a spec version that was not signed by both parties when its run started:
    # shown, but it neither opens the next gate nor counts toward stop-loss.
    rehearsal = models.BooleanField(default=False)
    clauses = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True)
    decided_by = user_reference()
    decided_by_system = models.CharField(max_length=80, blank=True)
    justification = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"

    def __str__(self) -> str:
        return f"{self.gate}: {self.verdict} ({self.kind})"


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
