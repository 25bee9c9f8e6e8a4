"""Failure classes shared by everything in runners/. Imports nothing from Django.

A gate verdict must never read an infrastructure problem as a product failure, so every
expected failure is raised as one of these and mapped to a run outcome by the task layer.
"""

from __future__ import annotations

from typing import Any

from runners.artifact import Artifact

# How a refused, changed host key begins its reason; a run's reason is the durable record of
# its failure, and the alert for a changed key is raised from it (gates.services.alerts.events).
HOST_KEY_CHANGED = "host key changed"


class RunnerError(Exception):
    """Base of every expected failure; `outcome` is the run outcome it maps to."""

    outcome = "internal_error"

    def __init__(self, message: str, *, host: str | None = None, step: str | None = None):
        self.reason = message
        self.host = host
        self.step = step
        # Raw files the failure rests on (what a probe printed), kept on the failed step by the
        # driver, so the run's evidence carries them; most failures have none.
        self.artifacts: list[Artifact] = []
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = [f"host {self.host}" if self.host else "", f"step {self.step}" if self.step else ""]
        prefix = ", ".join(part for part in where if part)
        return f"{prefix}: {self.reason}" if prefix else self.reason


class InfrastructureError(RunnerError):
    """The host, the network or the harness failed; the product was not measured.

    `permanent` errors (authentication refused, host key changed) will not heal by retrying.
    """

    outcome = "infra_error"

    def __init__(self, message: str, *, permanent: bool = False, **where: str | None):
        self.permanent = permanent
        super().__init__(message, **where)


class SpecError(RunnerError):
    """A value from the gate spec, the host record or the profile is not acceptable."""

    outcome = "spec_error"

    def __init__(self, message: str, *, field: str | None = None, **where: str | None):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message, **where)


class BenchmarkError(RunnerError):
    """The benchmark tool failed or produced output that cannot be trusted."""

    outcome = "benchmark_error"


class ContractError(RunnerError):
    """The host is no longer what G1 accepted: the run is `invalid`, naming the differences,
    before any server starts. Not a product failure and not the host's fault either."""

    outcome = "invalid"

    def __init__(self, message: str, *, differences: list[dict[str, Any]], **where: str | None):
        self.differences = differences
        super().__init__(message, **where)
