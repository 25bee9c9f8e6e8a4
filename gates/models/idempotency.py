"""Idempotency keys: the first response to a creating POST, kept so a retry gets it again."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class IdempotencyKey(models.Model):
    """One `Idempotency-Key` of one caller (a token, or a signed-in user) and what it answered.

    The row is written in the same transaction as what the request created, so it exists exactly
    when that did; a concurrent twin blocks on the unique index until then.
    """

    # "token:<id>" or "user:<id>": keys are per token, so two pipelines never collide.
    owner = models.CharField(max_length=40)
    key = models.CharField(max_length=255)
    # SHA-256 of method, path and the canonical body: the same key with another request is a 422.
    fingerprint = models.CharField(max_length=64)
    # Null only inside the claiming transaction, before the response is known; never committed.
    status_code = models.PositiveSmallIntegerField(null=True)
    response_body = models.JSONField(null=True, blank=True)
    # Set instead of response_body when the response holds a secret (a new API token's).
    response_sealed = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="one_idempotency_key_per_owner")
        ]

    def __str__(self) -> str:
        return f"{self.owner} {self.key}"
