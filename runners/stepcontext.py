"""What every step of a run shares: its context (host, profile, values) and what a step reports.

No Django; imported by runners.program.perform and runners.server.launch alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from documents.step import Step
from runners.artifact import Artifact
from runners.commands import fill
from runners.transport import Transport

LOG_TAIL_BYTES = 2000
SHORT_COMMAND_S = 60


@dataclass(frozen=True)
class StepContext:
    """What every step of one run needs: the host, the profile, and the run's values."""

    transport: Transport
    commands: dict[str, Any]
    values: dict[str, Any]
    run_dir: str
    token: str
    scratch: Path
    serve_timeout_s: float = 900.0
    bench_timeout_s: float = 6 * 3600.0
    prompts: list[str] = field(default_factory=list)
    max_tokens: int = 64
    # The longest request (prompt + output tokens) the run's servers must accept.
    context_tokens: int | None = None
    # The inventory G1 accepted (runners.contract.inventory_of); None when none was.
    accepted_inventory: dict[str, Any] | None = None
    # When the run started (epoch seconds): an XID logged since then falls in its window.
    window_start: float | None = None
    # A trace's stored bytes by SHA-256, for the replay step (None: the spec names no trace).
    trace_source: Callable[[str], bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.values['host_address']}:{self.values['port']}"


@dataclass
class StepProgress:
    done: bool
    detail: dict[str, Any] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    measurement: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None
    log: str = ""
    # A detached process the step waits for: the driver blocks on its exit on the host
    # instead of polling from here, so a finished benchmark is noticed within ~50 ms.
    waiting_on: str | None = None
    # The run is handed to another driver (a G4 soak: the collector's beat ticks).
    handoff: bool = False


def probe_values(ctx: StepContext) -> dict[str, Any]:
    return {**ctx.values, "run_dir": ctx.run_dir}


def remote_dir(ctx: StepContext, step: Step) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", step.get("session") or step["name"]).strip("-")
    return f"{ctx.run_dir}/{step['kind']}-{slug}"


def tail_of(ctx: StepContext, run_dir: str) -> str:
    argv = fill(["tail", "-c", str(LOG_TAIL_BYTES), "{run_dir}/stderr.log"], {"run_dir": run_dir})
    return ctx.transport.run(argv, timeout=SHORT_COMMAND_S).stdout.strip() or "(no stderr)"
