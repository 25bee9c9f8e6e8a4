"""Runs of a gate program and what they produced: steps, raw artifacts, measurements (a
soak's windows are in gates.models.soak). A run's lifecycle (`state`) is kept apart from how it
ended (`outcome`)."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from gates.models.choices import user_reference


class Run(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"
        CANCELED = "canceled"

    class Outcome(models.TextChoices):
        NONE = "", "not finished"
        COMPLETED = "completed"
        INFRA_ERROR = "infra_error"
        SPEC_ERROR = "spec_error"
        BENCHMARK_ERROR = "benchmark_error"
        INTERNAL_ERROR = "internal_error"

    class Source(models.TextChoices):
        REMOTE = "remote", "driven on the host"
        UPLOAD = "upload", "results uploaded by a person"

    ENDED = (State.FINISHED, State.CANCELED)

    gate = models.ForeignKey("gates.Gate", on_delete=models.PROTECT, related_name="runs")
    spec = models.ForeignKey("gates.GateSpec", on_delete=models.PROTECT, related_name="runs")
    host = models.ForeignKey(
        "gates.Host", on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    attempt = models.PositiveIntegerField()
    # Started on a spec version not yet signed by both parties: its decision never counts.
    rehearsal = models.BooleanField(default=False)
    # Names the run's directory and launch tokens on the host: unique across databases too, so
    # a reset database or a second installation never adopts another run's processes.
    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.REMOTE)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default="", blank=True)
    reason = models.TextField(blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    # The host lease's fencing token this run holds; stale holders fail the check on write.
    lease_token = models.BigIntegerField(null=True, blank=True)
    log = models.TextField(blank=True)
    # Characters ever appended to `log`; `log` keeps only the newest of them, so a reader's
    # offset stays meaningful after the front is cut (gates/logtail.py).
    log_written = models.PositiveBigIntegerField(default=0)
    requested_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_reason = models.CharField(max_length=500, blank=True)  # who asked said why
    last_dispatched_at = models.DateTimeField(null=True, blank=True)
    # Which task is driving the run right now, and until when its claim holds: a duplicate
    # delivery finds it claimed and leaves; a killed worker's claim simply expires.
    driver_token = models.CharField(max_length=36, blank=True)
    driver_until = models.DateTimeField(null=True, blank=True)
    # A transport outage being ridden out: when the host first failed to answer, how many
    # tries failed since, and when the next try is due (no task claims the run before; the
    # beat pokes it then). Cleared when the host answers again (docs/transport.md).
    outage_since = models.DateTimeField(null=True, blank=True)
    outage_retries = models.PositiveIntegerField(default=0)
    outage_retry_at = models.DateTimeField(null=True, blank=True)
    # G3: the TTFT-saving band predicted per tier when the run was planned
    # (gates.planner.run_band); null until then, {"predicted": null, "reason"} when unknown.
    predicted_ttft = models.JSONField(null=True, blank=True)
    # A G3 attempt that continues an inconclusive one (statistics.carry_repetitions): the run
    # whose complete repetitions it carries, how many, and the number its own repetitions
    # start at (after every number the carried chain used, so one numbering covers it).
    carried_from = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="carried_into"
    )
    carried_repetitions = models.PositiveIntegerField(default=0)
    first_repetition = models.PositiveIntegerField(default=1)
    # The host's profile as this run used it (documents.profile: name, commands, parameters)
    # and the SHA-256 of its canonical JSON: a later edit of the Profile row, or the host
    # pointed at another, leaves it as it was. Null before migration 0027 and for an upload
    # run that names no profile.
    profile_snapshot = models.JSONField(null=True, blank=True, editable=False)
    profile_digest = models.CharField(max_length=64, blank=True, editable=False)
    # An upload run that names a profile: the values given in place of a host's parameters
    # (offload_backend, ...), which say which side services ran beside each arm.
    upload_parameters = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["gate", "attempt"], name="one_run_per_attempt"),
            models.CheckConstraint(
                condition=models.Q(state__in=["finished", "canceled"], finished_at__isnull=False)
                | models.Q(state__in=["queued", "running"], finished_at__isnull=True),
                name="finished_at_iff_ended",
            ),
            models.CheckConstraint(
                condition=~models.Q(state="finished", outcome=""),
                name="finished_run_has_outcome",
            ),
            models.CheckConstraint(
                condition=models.Q(progress_done__lte=models.F("progress_total")),
                name="progress_within_total",
            ),
        ]
        indexes = [models.Index(fields=["state", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"{self.gate} run #{self.attempt}"

    @property
    def profile_name(self) -> str | None:
        return (self.profile_snapshot or {}).get("name")

    @property
    def profile_summary(self) -> dict | None:
        """Name, digest and its short form; None without a snapshot (no host, or made before)."""
        if not self.profile_digest:
            return None
        digest = self.profile_digest
        return {"name": self.profile_name, "digest": digest, "short_digest": digest[:12]}

    @property
    def is_ended(self) -> bool:
        return self.state in self.ENDED


class RunStep(models.Model):
    """One recorded step of a run's program; redelivered tasks find it done and move on."""

    class State(models.TextChoices):
        PENDING = "pending"
        STARTED = "started"
        DONE = "done"
        # The run ended (canceled, or failed elsewhere) while this step was under way.
        CANCELED = "canceled"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=120)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    # How many times a task took this step up: caps poison loops (a step that kills its worker).
    deliveries = models.PositiveIntegerField(default=0)
    detail = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="one_step_per_position"),
            models.UniqueConstraint(fields=["run", "name"], name="step_names_unique_in_run"),
        ]

    def __str__(self) -> str:
        return f"{self.run} step {self.position} {self.name}"


class Artifact(models.Model):
    """A raw tool output exactly as produced, with its SHA-256."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="artifacts")
    name = models.CharField(max_length=200)
    tool = models.CharField(max_length=40, blank=True)
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    content = models.BinaryField()
    uploaded = models.BooleanField(default=False, help_text="Uploaded by a person, not fetched.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["run", "name"]
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="artifact_name_unique_in_run")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.sha256[:12]})"


class Measurement(models.Model):
    """Normalized metrics of one arm at one tier in one repetition."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="measurements")
    arm = models.CharField(max_length=32)
    tier = models.PositiveIntegerField()
    repetition = models.PositiveIntegerField()
    metrics = models.JSONField()
    server = models.JSONField(null=True, blank=True)
    artifact = models.ForeignKey(
        Artifact, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["run", "repetition", "tier", "arm"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "arm", "tier", "repetition"], name="one_measurement_per_cell"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.arm} c={self.tier} r{self.repetition}"
