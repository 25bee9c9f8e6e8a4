"""The run plan: what a worker needs to drive one run, as typed values that gates.services
fills from the run's rows. Imports no Django and nothing from gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runners.steps import StepContext
from runners.transport import SshTarget, Transport


@dataclass(frozen=True)
class RunPlan:
    """How to reach the host, the profile's commands and the values its templates are filled
    with (validated when used), and the run's place on the host.

    `target` is None for a host reached without SSH (the machine the worker runs on). It holds
    the decrypted private key in memory only: SshTarget leaves the key out of repr().
    """

    host_name: str
    target: SshTarget | None
    commands: dict
    values: dict
    run_dir: str
    token: str
    serve_timeout_s: float
    probe_names: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    max_tokens: int = 64
    context_tokens: int | None = None

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
            context_tokens=self.context_tokens,
        )
