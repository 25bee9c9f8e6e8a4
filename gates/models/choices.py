"""Choices and field shapes shared by several models."""

from django.conf import settings
from django.db import models


class Verdict(models.TextChoices):
    """A gate's or a clause's verdict. Only FAIL counts toward stop-loss."""

    PENDING = "pending"
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    INVALID = "invalid"
    INFRA_ERROR = "infra_error"


def user_reference() -> models.ForeignKey:
    """Who did something, when someone did: optional, never deleted from under the record,
    and without a reverse accessor on the user (the record is about the action)."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
