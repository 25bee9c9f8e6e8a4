"""The demo's own supervisor: it starts the worker, the beat and the web server, and starts
the worker or the beat again when one dies (issue 27), saying so in the demo's output and
recording it (services.service_restart_record) so /healthz and pages can show it. In production
the service manager does this (docker compose's restart policy, docs/deployment.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gates import services

# The services whose death the demo rides out; a dead web server ends the demo (nobody could
# see the demo any more, and a restart loop would hide why).
RESTARTABLE = ("worker", "beat")


@dataclass
class Supervised:
    name: str
    command: list[str]
    cwd: Path
    env: dict[str, str]
    process: subprocess.Popen | None = field(default=None, repr=False)
    restarts: int = 0

    def start(self) -> Supervised:
        self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.env)
        return self

    @property
    def exit_code(self) -> int | None:
        """None while it runs."""
        return None if self.process is None else self.process.poll()


def restart_dead(children: list[Supervised], say: Callable[[str], None]) -> list[str]:
    """Start again each restartable service that died; the names restarted. Raises
    ServiceExited for a dead service the demo cannot do without."""
    restarted = []
    for child in children:
        code = child.exit_code
        if code is None:
            continue
        if child.name not in RESTARTABLE:
            raise ServiceExited(f"the demo's {child.name} exited (code {code}); see its output")
        child.restarts += 1
        say(f"The demo's {child.name} exited (code {code}); starting it again.")
        services.service_restart_record(name=child.name, reason=f"exited with code {code}")
        child.start()
        restarted.append(child.name)
    return restarted


class ServiceExited(Exception):
    pass
