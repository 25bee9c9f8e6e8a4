"""A G4 soak: its windows (SoakSample, one row per agent window) and its collector state: where its
agent lives on the host, how far the collector has
read, the deadline in force, the gaps and the provisional verdict. One row per G4 run, written
only by gates.services.soak.ticks."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Soak(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active"
        STOPPING = "stopping", "stop requested, collecting the rest"
        ENDED = "ended"

    run = models.OneToOneField("gates.Run", on_delete=models.CASCADE, related_name="soak")
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    run_dir = models.CharField(max_length=400)
    # Each relaunch of a lost agent is a new generation in its own wrapper directory.
    generation = models.PositiveIntegerField(default=1)
    agent_sha256 = models.CharField(max_length=64)
    # Byte offset in windows.jsonl after the last stored line, and that line's seq.
    offset = models.BigIntegerField(default=0)
    last_seq = models.IntegerField(default=-1)
    # Unix seconds on the host's clock, as the agent reports them.
    started = models.FloatField(null=True, blank=True)
    deadline = models.FloatField(null=True, blank=True)
    # A deadline the collector must still pass to the agent (an extension).
    deadline_wanted = models.FloatField(null=True, blank=True)
    extended_h = models.FloatField(default=0)
    stop_reason = models.TextField(blank=True)
    agent_exit = models.JSONField(null=True, blank=True)
    last_contact_at = models.DateTimeField(null=True, blank=True)
    heartbeat_age_s = models.FloatField(null=True, blank=True)
    unreachable_since = models.DateTimeField(null=True, blank=True)
    gaps = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)
    provisional = models.JSONField(null=True, blank=True)
    # The running summary the verdict is decided from (gates/decisions/g4_summary.py), folded one
    # tick at a time under this row's lock; its completed points are SoakPoint rows. None until
    # the first window (or for a soak stored before summaries: folded from its rows once).
    summary = models.JSONField(null=True, blank=True)
    # The host's health over the soak so far (runners/soak/fitness.py health_fold): the run's
    # start the XID rule counts from, ECC baselines, each distinct note with its windows.
    health = models.JSONField(default=dict, blank=True)
    compressed = models.BooleanField(default=False)
    next_tick_at = models.DateTimeField(null=True, blank=True)
    # Until when the beat's tick message for this soak may still be waiting in the queue: no
    # second one is sent before then (TOLLGATE_SOAK_POKE_S), so a backlog is not multiplied.
    poked_until = models.DateTimeField(null=True, blank=True)
    # The tick that reads the host now, and until when its claim holds.
    tick_token = models.CharField(max_length=36, blank=True)
    tick_until = models.DateTimeField(null=True, blank=True)
    # Retention (docs/soak.md): once the evidence is sealed, the janitor drops the raw files of
    # the windows that tell nothing. `retention` is the record a bundle signs (policy, windows
    # stored, dropped seq ranges), written before the first file goes; the counts grow as each
    # chunk is deleted; `pruned_at` is set when none is left. `prune_until`: the janitor's claim.
    retention = models.JSONField(default=dict, blank=True)
    pruned_files = models.PositiveIntegerField(default=0)
    pruned_bytes = models.PositiveBigIntegerField(default=0)
    pruned_at = models.DateTimeField(null=True, blank=True)
    prune_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state", "next_tick_at"])]

    def __str__(self) -> str:
        return f"soak of {self.run}"

    def retention_summary(self) -> dict:
        """The retention policy in force and what it did (the run page and the API's `soak`):
        `state` is `none` (no policy: every raw file kept), `waiting` (kept until the evidence
        is sealed and the grace has passed), `pruning` or `pruned`."""
        policy = (self.run.spec.document or {}).get("retention")
        record = self.retention or {}
        state = "pruned" if self.pruned_at else "pruning" if record else "waiting"
        return {
            "policy": policy,
            "state": state if policy else "none",
            "windows": record.get("windows"),
            "kept_windows": record.get("kept_windows"),
            "dropped_windows": record.get("dropped_windows"),
            "files_deleted": self.pruned_files,
            "bytes_freed": self.pruned_bytes,
            "pruned_at": self.pruned_at.isoformat() if self.pruned_at else None,
        }


# The window metrics the soak page draws, each also stored as a float column of the same name:
# reading 26,000 rows' numbers out of their JSON costs the database ~0.5 s, reading columns
# a tenth of that. `metrics` stays the record; the columns are copies written with it.
SOAK_SAMPLE_NUMBERS = (
    "output_throughput",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "completed",
    "failed",
    "kv_cache_usage",
    "external_hit_rate",
    "memory_bytes",
    "host_available_bytes",
    "gpu_memory_used_mib",
)


def soak_sample_columns(metrics: dict) -> dict:
    """The column values of a window's metrics: a number as a float, anything else (missing,
    None, a string, a boolean) as None; `crashed` only when it is true."""
    columns = {name: _number_or_none(metrics.get(name)) for name in SOAK_SAMPLE_NUMBERS}
    return {**columns, "crashed": metrics.get("crashed") is True}


def _number_or_none(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class SoakSample(models.Model):
    """One window of a stability soak; `seq` is the agent's sequence number (dedupe key).
    Build one with `SoakSample.of_window` so the page's columns match its metrics."""

    run = models.ForeignKey("gates.Run", on_delete=models.PROTECT, related_name="soak_samples")
    seq = models.PositiveIntegerField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    metrics = models.JSONField()
    received_at = models.DateTimeField(default=timezone.now, editable=False)
    crashed = models.BooleanField(default=False)
    output_throughput = models.FloatField(null=True, blank=True)
    ttft_p50_ms = models.FloatField(null=True, blank=True)
    ttft_p99_ms = models.FloatField(null=True, blank=True)
    completed = models.FloatField(null=True, blank=True)
    failed = models.FloatField(null=True, blank=True)
    kv_cache_usage = models.FloatField(null=True, blank=True)
    external_hit_rate = models.FloatField(null=True, blank=True)
    memory_bytes = models.FloatField(null=True, blank=True)
    host_available_bytes = models.FloatField(null=True, blank=True)
    gpu_memory_used_mib = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="one_sample_per_seq"),
            models.CheckConstraint(
                condition=models.Q(window_end__gte=models.F("window_start")),
                name="window_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} window {self.seq}"

    @classmethod
    def of_window(cls, *, metrics: dict, **fields) -> SoakSample:
        """A window's row with its page columns taken from `metrics` (the only way the
        writers build one, so the two never disagree)."""
        return cls(metrics=metrics, **fields, **soak_sample_columns(metrics))


class SoakPoint(models.Model):
    """A point of a soak's summary: a change-point block of a series (its first window's seq
    and start, the block's median) or a kept memory sample (seq, mid time, bytes). Written
    with the summary that counts it, never changed: re-judging reads these, not every window."""

    run = models.ForeignKey("gates.Run", on_delete=models.CASCADE, related_name="soak_points")
    series = models.CharField(max_length=32)
    position = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    at = models.FloatField()
    value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "series", "position"], name="one_soak_point_per_position"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.series} point {self.position}"
