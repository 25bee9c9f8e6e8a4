"""G4 soak on the host: upload and launch the agent (launch-token adoption), one collector read,
the agent's status, and stopping it. Imports no Django; gates/services/soak/ticks.py records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from documents.step import Step
from runners.commands import HOSTCTL_ARGV, fill
from runners.errors import InfrastructureError
from runners.soak import collector
from runners.stepcontext import StepContext
from runners.transport import DetachedStatus, Launch, Transport

# Uploaded under the names the host-side scripts import each other by (collector.AGENT_FILE,
# collector.WATCH_FILE, collector.PROCESSES_FILE): the agent imports them from its own folder.
AGENT = Path(__file__).resolve().parent / "agent.py"
WATCH = Path(__file__).resolve().parent / "watch.py"
PROCESSES = Path(__file__).resolve().parent / "processes.py"
HOSTCTL = Path(__file__).resolve().parents[1] / "remote" / "hostctl.py"
READ_TIMEOUT_S = 60
# What one read may carry back (raw files included): within one command's capture.
READ_MAX_BYTES = 768 * 1024


def launch_agent(
    transport: Transport,
    *,
    config: dict[str, Any],
    paths: collector.SoakPaths,
    python: str,
    token: str,
    generation: int,
    scratch: Path,
) -> tuple[Launch, str]:
    """Upload the agent, the reader and the config (each SHA-256 checked on the host), then
    start it detached; a retried launch of the same generation adopts the running agent. The
    uploads are repeated for every generation: a rebooted host may have lost its /tmp."""
    digest = transport.put(str(AGENT), paths.agent_path)
    transport.put(str(WATCH), f"{paths.run_dir}/{collector.WATCH_FILE}")
    transport.put(str(PROCESSES), f"{paths.run_dir}/{collector.PROCESSES_FILE}")
    transport.put(str(HOSTCTL), f"{paths.run_dir}/hostctl.py")
    local = scratch / f"soak-agent-{generation}.json"
    local.write_text(json.dumps(config, sort_keys=True))
    transport.put(str(local), paths.config_path)
    argv = fill(
        ["{python}", "{run_dir}/" + collector.AGENT_FILE, "run", "{run_dir}/soak-data/agent.json"],
        {"python": python, "run_dir": paths.run_dir},
    )
    heartbeat = max(1, int(config["heartbeat_s"]))
    launch = transport.launch_detached(
        paths.agent_dir(generation),
        f"{token}-soak-{generation}",
        argv,
        heartbeat_seconds=heartbeat,
    )
    return launch, digest


def read(
    transport: Transport,
    *,
    paths: collector.SoakPaths,
    python: str,
    offset: int,
    ack_seq: int,
    stop: bool,
    deadline: float | None,
) -> collector.Read:
    """One tick's read: acknowledge what is stored, pass on a stop or a new deadline, and
    return the agent's state and the next windows after `offset`."""
    argv = fill(
        [*HOSTCTL_ARGV, "soak-read", "{run_dir}/soak-data"],
        {"python": python, "run_dir": paths.run_dir},
    )
    argv += [
        str(int(offset)),
        str(READ_MAX_BYTES),
        str(int(ack_seq)),
        "stop" if stop else "none",
        "none" if deadline is None else repr(float(deadline)),
    ]
    result = transport.run(argv, timeout=READ_TIMEOUT_S, max_bytes=2 * READ_MAX_BYTES)
    if not result.ok or result.truncated:
        raise InfrastructureError(
            f"soak-read exited {result.exit_code}: {result.stderr.strip()[-300:]}",
            host=transport.host,
            step="soak read",
        )
    try:
        return collector.parse_read(result.stdout)
    except collector.ReadError as error:
        raise InfrastructureError(str(error), host=transport.host, step="soak read") from error


def agent_status(
    transport: Transport, *, paths: collector.SoakPaths, generation: int
) -> DetachedStatus:
    return transport.status(paths.agent_dir(generation))


def stop_agent(transport: Transport, *, paths: collector.SoakPaths, generation: int) -> None:
    """Kill the agent's whole group (the server runs in a group of its own: the agent stops it
    on TERM; a leftover one is stopped by the next agent or the run's cleanup)."""
    transport.kill(paths.agent_dir(generation), grace=15.0)


def tick(transport: Transport, state: collector.TickState, scratch: Path) -> collector.TickOutcome:
    """Read the soak once; stop it on cancel; relaunch a lost agent (a new generation on the
    same data directory, numbering on from the last window) while that is allowed."""
    paths = state.paths
    got = read(
        transport,
        paths=paths,
        python=state.python,
        offset=state.offset,
        ack_seq=state.ack_seq,
        stop=state.stop,
        deadline=state.deadline,
    )
    if state.cancel:
        stop_agent(transport, paths=paths, generation=state.generation)
        return collector.TickOutcome(got, agent_running=False, killed=True)
    status = agent_status(transport, paths=paths, generation=state.generation)
    if status.exit_code is not None and got.exit is None:
        # It exited between the read and the status: its exit.json is there now.
        got = read(
            transport,
            paths=paths,
            python=state.python,
            offset=state.offset,
            ack_seq=state.ack_seq,
            stop=False,
            deadline=None,
        )
    if status.running or got.exit is not None or got.windows:
        return collector.TickOutcome(got, agent_running=status.running)
    cause = "the host rebooted" if status.rebooted else _lost(status)
    if not state.may_relaunch:
        return collector.TickOutcome(got, agent_running=False, cause=cause)
    generation = state.generation + 1
    launch_agent(
        transport,
        config=state.config,
        paths=paths,
        python=state.python,
        token=state.token,
        generation=generation,
        scratch=scratch,
    )
    return collector.TickOutcome(got, agent_running=True, relaunched=generation, cause=cause)


def _lost(status: DetachedStatus) -> str:
    if not status.exists:
        return "the agent's directory is gone"
    if status.exit_code is not None:
        return f"the agent exited {status.exit_code} without writing exit.json"
    return "the agent process is gone (killed)"


def launch_step(ctx: StepContext, step: Step, detail: dict[str, Any]) -> dict[str, Any]:
    """The G4 program's one host step: start the agent (generation 1), or adopt it when the
    launch is retried. Returns what the step records; the collector ticks take over."""
    if detail.get("launched"):
        return {}
    paths = collector.SoakPaths(ctx.run_dir)
    config = collector.agent_config(step["spec"], ctx.commands, ctx.values, paths)
    launch, digest = launch_agent(
        ctx.transport,
        config=config,
        paths=paths,
        python=ctx.values.get("python", "python3"),
        token=ctx.token,
        generation=1,
        scratch=ctx.scratch,
    )
    return {
        "launched": True,
        "adopted": launch.adopted,
        "run_dir": paths.agent_dir(1),
        "soak_run_dir": paths.run_dir,
        "agent_sha256": digest,
    }
