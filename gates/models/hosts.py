"""Hosts under test and the platform profiles that say how to drive them."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Profile(models.Model):
    """How commands look on a platform, as data (command templates per arm, probes...).

    `builtin` rows are loaded from gates/profiles/*.json on every migrate.
    """

    name = models.SlugField(max_length=60, unique=True)
    description = models.TextField(blank=True)
    builtin = models.BooleanField(default=False)
    commands = models.JSONField(default=dict)
    parameters = models.JSONField(default=dict, blank=True)
    required_tools = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Host(models.Model):
    class Transport(models.TextChoices):
        SSH = "ssh"
        LOCAL = "local"

    organization = models.ForeignKey(
        "gates.Organization",
        on_delete=models.PROTECT,
        related_name="hosts",
        help_text="The customer organization that owns the host.",
    )
    name = models.SlugField(max_length=80)
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.SSH)
    address = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(default=22)
    username = models.CharField(max_length=64, blank=True)
    # AES-256-GCM ciphertext of the private key, bound to this organization and host id.
    credential_ciphertext = models.BinaryField(null=True, blank=True, editable=False)
    key_file_path = models.CharField(max_length=500, blank=True)
    # The pinned host key as an OpenSSH public key line; confirmed by a person, never learned.
    host_key = models.TextField(blank=True)
    host_key_fingerprint = models.CharField(max_length=80, blank=True)
    profile = models.ForeignKey(Profile, on_delete=models.PROTECT, related_name="hosts")
    labels = models.JSONField(default=dict, blank=True)
    # Values for the profile's template placeholders on this host (python, model_path,
    # run_root, port...); they override the profile's defaults and are validated when used.
    parameters = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The lease: at most one run holds a host. `fencing_token` grows with every acquisition,
    # so a run that lost its lease can be told apart from the current holder on every write.
    lease_run = models.ForeignKey(
        "gates.Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    lease_acquired_at = models.DateTimeField(null=True, blank=True)
    fencing_token = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["organization", "name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "name"], name="host_name_per_org"),
            models.CheckConstraint(
                condition=models.Q(transport="local") | ~models.Q(host_key=""),
                name="ssh_host_has_pinned_key",
                violation_error_message="an SSH host needs its pinned host key: scan it and "
                "confirm the fingerprint with the host's owner (the hosts page does both)",
            ),
            models.CheckConstraint(
                condition=models.Q(transport="local")
                | ~models.Q(address="") & ~models.Q(username=""),
                name="ssh_host_has_address_and_user",
                violation_error_message="an SSH host needs an address and a user name",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def has_stored_credential(self) -> bool:
        return bool(self.credential_ciphertext)

    @property
    def display_address(self) -> str:
        if self.transport == self.Transport.LOCAL:
            return "local"
        return f"{self.username}@{self.address}:{self.port}"


class HostCleanup(models.Model):
    """What a run left on its host when it ended and the host could not be reached: its
    process groups (found by the run's launch token) and its run directory. The janitor
    retries it until nothing of the run is left running; until then the host cannot be leased.
    """

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="cleanups")
    run = models.OneToOneField("gates.Run", on_delete=models.PROTECT, related_name="host_cleanup")
    run_dir = models.CharField(max_length=500)
    # The run's launch token: every process it launched has a token starting with it.
    token = models.CharField(max_length=80)
    launched_dirs = models.JSONField(default=list, blank=True)
    keep_run_dir = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    last_problem = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # A janitor task's claim on the row: a second copy finds it claimed and leaves it.
    claimed_until = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["host", "done_at"])]

    def __str__(self) -> str:
        state = "done" if self.done_at else "pending"
        return f"cleanup of {self.run_dir} on {self.host} ({state})"

    @property
    def pending(self) -> bool:
        return self.done_at is None
