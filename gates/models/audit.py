"""The audit trail: who did what, when, from where. Append-only."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from gates.models.appendonly import AppendOnlyModel
from gates.models.choices import user_reference


class AuditEvent(AppendOnlyModel):
    at = models.DateTimeField(default=timezone.now, db_index=True, editable=False)
    actor = user_reference()
    # "system", "worker", "api-token:<prefix>"... when no user acted, or to say how a user did.
    actor_label = models.CharField(max_length=120, blank=True)
    organization = models.ForeignKey(
        "gates.Organization", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    action = models.CharField(max_length=60, db_index=True)
    target_type = models.CharField(max_length=40, blank=True)
    target_id = models.CharField(max_length=40, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_label or self.actor} {self.action}"
