"""Liveness marks written by background services (the worker canary), read by /healthz."""

from django.db import models
from django.utils import timezone


class ServiceHeartbeat(models.Model):
    name = models.CharField(max_length=40, primary_key=True)
    at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%H:%M:%S}"
