"""What gates end in: append-only decisions (the alert outbox is in gates.models.alerting)."""

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


class ReportPdf(models.Model):
    """A decision's gate report as a PDF, rendered once by the worker and then served as stored.

    Keyed by the decision and a fingerprint of everything else the report reads (the engine
    decision it shows the numbers of, the G1 inventory decision, the spec's signatures, the
    runs): anything that changes the paper changes the key, so a stale PDF is never served.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "queued for the worker"
        READY = "ready", "ready"
        FAILED = "failed", "failed"

    decision = models.ForeignKey(
        "gates.Decision", on_delete=models.CASCADE, related_name="report_pdfs"
    )
    fingerprint = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    content = models.BinaryField(blank=True, default=b"")
    sha256 = models.CharField(max_length=64, blank=True)
    size = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    rendered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["decision", "fingerprint"], name="report_pdf_one_per_version"
            )
        ]

    def __str__(self) -> str:
        return f"PDF of decision {self.decision_id} ({self.state})"
