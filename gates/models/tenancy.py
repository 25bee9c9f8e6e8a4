"""Who is who: organizations, their members' roles, and API tokens for CI."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Organization(models.Model):
    class Kind(models.TextChoices):
        VENDOR = "vendor"
        CUSTOMER = "customer"

    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=60, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # Extra alert recipients beyond the members (an on-call alias, say).
    alert_emails = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_vendor(self) -> bool:
        return self.kind == self.Kind.VENDOR


class Membership(models.Model):
    class Role(models.TextChoices):
        VENDOR_ADMIN = "vendor_admin"
        VENDOR_ENGINEER = "vendor_engineer"
        CUSTOMER_OWNER = "customer_owner"
        CUSTOMER_VIEWER = "customer_viewer"

    VENDOR_ROLES = (Role.VENDOR_ADMIN, Role.VENDOR_ENGINEER)

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=24, choices=Role.choices)
    receives_alerts = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="one_membership_per_org")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} as {self.role}"


class ApiToken(models.Model):
    """A bearer token for CI. Only a SHA-256 digest is stored; the secret is shown once."""

    class Scope(models.TextChoices):
        READ = "read"
        RUN = "run"
        SIGN = "sign"
        TOKENS = "tokens"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="api_tokens"
    )
    engagement = models.ForeignKey(
        "gates.Engagement",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_tokens",
    )
    name = models.CharField(max_length=100)
    # The public part of the token, used to find the row; never enough to authenticate.
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="api_tokens"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        expired = self.expires_at is not None and self.expires_at <= now
        return self.revoked_at is None and not expired

    def allows(self, scope: str) -> bool:
        return scope in self.scopes
