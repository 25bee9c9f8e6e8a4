"""The run plan: what a worker needs to drive one run, as typed values that gates.services
fills from the run's rows. Imports no Django and nothing from gates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.cleanup import HostLeftovers
from runners.commands import PLACEHOLDERS, KindError, checked_values, number
from runners.errors import SpecError
from runners.stepcontext import StepContext
from runners.transport import SshTarget, Transport

# Seconds a transient transport outage is ridden out (a day at most: a soak's worth).
RETRY_WINDOW = number(0.0, 86_400.0)


@dataclass(frozen=True)
class RunPlan:
    """How to reach the host, the profile's commands and the values its templates are filled
    with (validated when used), and the run's place on the host.

    `target` is None for a host reached without SSH (the machine the worker runs on). It holds
    the decrypted private key in memory only: SshTarget leaves the key out of repr().

    Built only from checked values: every value with a placeholder kind and the run directory
    are validated here, before any step reaches the host (SpecError names the field).
    `retry_window_s`: how long a transient transport outage is ridden out before the run
    ends as infra_error (the services fill it from the host or the setting; 0 gives up at
    once); `keep_run_dir`: leave the run directory on the host for inspection.
    """

    host_name: str
    target: SshTarget | None
    commands: dict[str, Any]
    values: dict[str, Any]
    run_dir: str
    token: str
    serve_timeout_s: float
    probe_names: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    max_tokens: int = 64
    retry_window_s: float = 0.0
    keep_run_dir: bool = False
    accepted_inventory: dict[str, Any] | None = None
    context_tokens: int | None = None
    window_start: float | None = None
    # The spec's trace bytes by SHA-256, read only when the replay step builds the replay.
    trace_source: Callable[[str], bytes] | None = None

    def __post_init__(self) -> None:
        checked_values(self.values)
        try:
            PLACEHOLDERS["run_dir"].check(self.run_dir)
        except KindError as problem:
            raise SpecError(str(problem), field="run_root", host=self.host_name) from None
        window = checked_retry_window(self.retry_window_s, host=self.host_name)
        object.__setattr__(self, "retry_window_s", window)  # "60" from JSON is kept as 60.0
        if not isinstance(self.keep_run_dir, bool):
            raise SpecError("must be true or false", field="keep_run_dir", host=self.host_name)

    @property
    def leftovers(self) -> HostLeftovers:
        """What this run may leave on its host, for the cleanup when it ends."""
        return HostLeftovers(run_dir=self.run_dir, token=self.token, keep_run_dir=self.keep_run_dir)

    def step_context(self, transport: Transport, scratch: Path) -> StepContext:
        """What every step of this run needs, on an open transport to its host."""
        return StepContext(
            transport=transport,
            commands=self.commands,
            values=self.values,
            run_dir=self.run_dir,
            token=self.token,
            scratch=scratch,
            serve_timeout_s=self.serve_timeout_s,
            prompts=self.prompts,
            max_tokens=self.max_tokens,
            accepted_inventory=self.accepted_inventory,
            context_tokens=self.context_tokens,
            window_start=self.window_start,
            trace_source=self.trace_source,
        )


def checked_retry_window(value: object, *, host: str | None = None) -> float:
    """A retry window in seconds, from a host parameter or the setting."""
    try:
        return float(RETRY_WINDOW.check(value))
    except KindError as problem:
        raise SpecError(str(problem), field="transport_retry_window_s", host=host) from None
