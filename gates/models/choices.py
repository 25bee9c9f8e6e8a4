"""Choices shared by several models."""

from django.db import models


class Verdict(models.TextChoices):
    """A gate's or a clause's verdict. Only FAIL counts toward stop-loss."""

    PENDING = "pending"
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    INVALID = "invalid"
    INFRA_ERROR = "infra_error"
