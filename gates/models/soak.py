"""A G4 soak's collector state: where its agent lives on the host, how far the collector has
read, the deadline in force, the gaps and the provisional verdict. One row per G4 run, written
only by gates.services.soak."""

from __future__ import annotations

from django.db import models


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
    # The host's health over the soak so far (runners/soakhealth.py health_fold): the run's
    # start the XID rule counts from, ECC baselines, each distinct note with its windows.
    health = models.JSONField(default=dict, blank=True)
    compressed = models.BooleanField(default=False)
    next_tick_at = models.DateTimeField(null=True, blank=True)
    # The tick that reads the host now, and until when its claim holds.
    tick_token = models.CharField(max_length=36, blank=True)
    tick_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state", "next_tick_at"])]

    def __str__(self) -> str:
        return f"soak of {self.run}"
