"""Engagements, their four gates, and the versioned gate specs the gates are judged by."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from gates.models.choices import Verdict, user_reference


class Engagement(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active"
        PASSED = "passed"
        STOPPED = "stopped"
        ABORTED = "aborted"

    organization = models.ForeignKey(
        "gates.Organization",
        on_delete=models.PROTECT,
        related_name="engagements",
        help_text="The customer organization whose hosts are tested.",
    )
    title = models.CharField(max_length=200)
    model_name = models.CharField(max_length=200, help_text="The model under test.")
    platform = models.TextField(blank=True, help_text="GPUs, interconnect, vLLM version...")
    planned_start = models.DateField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    state_reason = models.TextField(blank=True)
    # The KV planner's inputs for this deployment (model, GPUs, TP, dtype): see gates/planner.py.
    kv_plan = models.JSONField(default=dict, blank=True)
    created_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title


class Gate(models.Model):
    class Kind(models.TextChoices):
        G1 = "G1", "G1 arrival acceptance"
        G2 = "G2", "G2 functional integration"
        G3 = "G3", "G3 performance"
        G4 = "G4", "G4 stability soak"

    class State(models.TextChoices):
        LOCKED = "locked"
        READY = "ready"
        RUNNING = "running"
        DECIDED = "decided"
        WAIVED = "waived"

    # Which state may follow which; services refuse anything else.
    TRANSITIONS = {
        State.LOCKED: {State.READY},
        State.READY: {State.RUNNING, State.WAIVED},
        State.RUNNING: {State.READY, State.DECIDED},
        State.DECIDED: {State.RUNNING, State.WAIVED},
        State.WAIVED: set(),
    }

    engagement = models.ForeignKey(Engagement, on_delete=models.PROTECT, related_name="gates")
    kind = models.CharField(max_length=2, choices=Kind.choices)
    position = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.LOCKED)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.PENDING)
    # Set when a failed gate has spent its attempts: a vendor admin must stop or waive.
    stop_loss_review = models.BooleanField(default=False)
    planned_start = models.DateField(null=True, blank=True)
    planned_end = models.DateField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # What a gate read derives from its specs, signatures and latest engine decision, stored
    # when one of those (all append-only) is created: CI polls a gate for hours, and building
    # the read from them costs more than the rest of the request (gates.selectors.gate_readout,
    # bench/api_speed.py). Null until first written; a read of an older shape rebuilds it.
    readout = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["engagement", "position"]
        constraints = [
            models.UniqueConstraint(fields=["engagement", "kind"], name="one_gate_per_kind"),
            models.CheckConstraint(
                condition=models.Q(position__gte=1, position__lte=4), name="gate_position_1_4"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.engagement} / {self.kind}"

    @property
    def current_spec(self) -> GateSpec:
        """The latest version: a gate is created with its version 1 (engagement_create) and
        versions are never deleted, so there is always one."""
        return self.specs.order_by("-version").first()

    def can_move_to(self, state: str) -> bool:
        if self.state == self.State.DECIDED and state == self.State.RUNNING:
            return self.verdict != Verdict.PASS and not self.stop_loss_review
        return state in self.TRANSITIONS[self.State(self.state)]


class GateSpec(models.Model):
    """One version of a gate's contract. Frozen once a run used it or a party signed it."""

    gate = models.ForeignKey(Gate, on_delete=models.PROTECT, related_name="specs")
    version = models.PositiveIntegerField()
    document = models.JSONField()
    # SHA-256 of the canonical JSON of `document`: what a signature is a signature of.
    digest = models.CharField(max_length=64)
    created_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    frozen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["gate", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["gate", "version"], name="one_spec_per_version")
        ]

    def __str__(self) -> str:
        return f"{self.gate} spec v{self.version}"

    def save(self, *args, **kwargs):
        # A frozen version is evidence: a run was measured against it or a party signed it.
        if not self._state.adding:
            stored = type(self).objects.filter(pk=self.pk).values("document", "frozen_at").first()
            if stored and stored["frozen_at"] and stored["document"] != self.document:
                from gates.errors import FrozenSpecError

                raise FrozenSpecError(
                    f"spec v{self.version} is frozen; changes make a new version",
                    field="document",
                )
        super().save(*args, **kwargs)

    @property
    def is_frozen(self) -> bool:
        return self.frozen_at is not None

    def signature(self, party: str):
        """The party's signature over this version's digest, or None."""
        return self.signatures.filter(party=party, digest=self.digest).first()

    @property
    def signed_parties(self) -> set[str]:
        return set(self.signatures.filter(digest=self.digest).values_list("party", flat=True))

    @property
    def in_force(self) -> bool:
        """Both parties signed this exact document: decisions on it count."""
        return self.signed_parties >= {"vendor", "customer"}

    fully_signed = in_force

    @property
    def vendor_signed_by(self):
        signature = self.signature("vendor")
        return signature.signed_by if signature else None

    @property
    def vendor_signed_at(self):
        signature = self.signature("vendor")
        return signature.signed_at if signature else None

    @property
    def customer_signed_by(self):
        signature = self.signature("customer")
        return signature.signed_by if signature else None

    @property
    def customer_signed_at(self):
        signature = self.signature("customer")
        return signature.signed_at if signature else None


class WorkloadTrace(models.Model):
    """A customer's request trace, uploaded once per engagement and named in specs by its
    SHA-256 (so both parties sign the exact file); its characterisation is computed after
    upload, with done/total progress in requests."""

    class State(models.TextChoices):
        CHARACTERIZING = "characterizing"
        READY = "ready"
        FAILED = "failed"

    engagement = models.ForeignKey(Engagement, on_delete=models.PROTECT, related_name="traces")
    name = models.CharField(max_length=200, help_text="The file name as uploaded.")
    format = models.CharField(max_length=16)
    # Tokens per hash id; null for a load-shape format (BurstGPT, Azure) that has no blocks.
    block_tokens = models.PositiveIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    content = models.BinaryField()
    requests = models.PositiveIntegerField(help_text="Counted when the upload was validated.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.CHARACTERIZING)
    progress_done = models.PositiveIntegerField(default=0)
    # Set by the task that took the characterisation up; a stale claim (a killed worker) is
    # taken over, a fresh one makes a redelivered poke do nothing.
    claimed_at = models.DateTimeField(null=True, blank=True)
    profile = models.JSONField(null=True, blank=True, help_text="runners.traces TraceProfile")
    error = models.TextField(blank=True)
    uploaded_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["engagement", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["engagement", "sha256"], name="one_trace_per_digest"),
            models.CheckConstraint(
                condition=models.Q(state__in=["characterizing", "ready", "failed"]),
                name="trace_state_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.sha256[:12]})"


class TtftBandPrediction(models.Model):
    """The KV planner page's predicted TTFT-saving band for one set of inputs (model, GPUs, KV
    size, workload, tiers; gates.planner.run_band), found by their digest. A task computes it
    tier by tier with done/total progress: the model takes seconds to minutes, too long for a
    web request. Here beside the traces, the other planner input a task computes (gates/models
    holds fifteen modules)."""

    class State(models.TextChoices):
        COMPUTING = "computing"
        READY = "ready"
        FAILED = "failed"

    # SHA-256 of the inputs' canonical JSON: only someone who has the inputs can find the row.
    digest = models.CharField(max_length=64, unique=True)
    inputs = models.JSONField(help_text="gates.planner.run_band.band_inputs_to_dict")
    state = models.CharField(max_length=16, choices=State.choices, default=State.COMPUTING)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField()
    # Set by the task computing it and renewed after each tier; a stale one is taken over.
    claimed_at = models.DateTimeField(null=True, blank=True)
    tiers = models.JSONField(default=list, help_text="[{concurrency, low, high}], as computed")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["computing", "ready", "failed"]),
                name="ttft_band_state_known",
            ),
        ]

    def __str__(self) -> str:
        return f"TTFT band {self.digest[:12]} ({self.state})"
