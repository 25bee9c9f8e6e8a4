"""The server under test and its port: free (or held by this run's own server) before a
launch, and, once healthy, answered by the process group the run launched. A foreign process
on the port (an orphan of another run, someone's test server) is an infrastructure error that
names it, never something to measure. Imports no Django.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runners.commands import HOSTCTL_ARGV, fill
from runners.errors import InfrastructureError
from runners.transport import DetachedStatus, Transport

LISTENER_TIMEOUT_S = 30


@dataclass(frozen=True)
class Listener:
    """Who listens on a TCP port of the host: `processes` are those the account can see."""

    port: int
    listening: bool
    processes: tuple[dict[str, Any], ...] = ()

    def held_by(self, pgid: int | None) -> bool:
        """True when the port is listened on, and only by processes of group `pgid`."""
        if pgid is None or not self.listening or not self.processes:
            return False
        return all(process.get("pgid") == pgid for process in self.processes)

    def describe(self) -> str:
        if not self.listening:
            return "no process"
        if not self.processes:
            return "a process this account cannot see"
        return ", ".join(
            f"pid {p.get('pid')} ({p.get('command') or 'unknown command'})" for p in self.processes
        )


def listener(transport: Transport, values: dict[str, Any], run_dir: str) -> Listener:
    """Ask the host helper (uploaded to run_dir) who listens on the run's port."""
    argv = fill([*HOSTCTL_ARGV, "listener", "{port}"], {**values, "run_dir": run_dir})
    result = transport.run(argv, timeout=LISTENER_TIMEOUT_S)
    try:
        # Free-form JSON from the host: None or a wrong shape raises below, caught here.
        found: Any = json.loads(result.stdout) if result.ok else None
        return Listener(
            int(found["port"]), bool(found["listening"]), tuple(found.get("processes", ()))
        )
    except (TypeError, ValueError, KeyError):
        raise InfrastructureError(
            f"the host helper could not list the listeners of port {values.get('port')} "
            f"(exit {result.exit_code}): {result.stderr.strip()[-300:]}",
            host=transport.host,
            step="port check",
        ) from None


def require_port_free(found: Listener, own: DetachedStatus, *, host: str, step: str) -> None:
    """Before a launch: the port is free, or held by the server this step launched before
    (a launch whose answer was lost, adopted by its token)."""
    if not found.listening or (own.group_alive and found.held_by(own.pgid)):
        return
    raise InfrastructureError(
        f"port {found.port} is already in use by {found.describe()}, not by a server this run "
        "launched; nothing was started (stop that process or free the port)",
        permanent=True,
        host=host,
        step=step,
    )


def require_answered_by(found: Listener, own: DetachedStatus, *, host: str, step: str) -> None:
    """After a health check passed: the process answering is the one the run launched."""
    if own.running and found.held_by(own.pgid):
        return
    raise InfrastructureError(
        f"the process answering on port {found.port} is {found.describe()}, not the server "
        f"this run launched (pid {own.pid}): a foreign process on the port, so nothing was "
        "measured",
        permanent=True,
        host=host,
        step=step,
    )
