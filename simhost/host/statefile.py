"""Live GPU state shared between a running `serve` and `smi`: one small JSON file per server.

A server writes `<state dir>/serve-<pid>.json` (atomic rename) about twice a second and removes
it on a clean exit; `smi` adds up the files whose process is still alive, so a crashed server's
memory is freed as on a real GPU. Owns only this file I/O; standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

ENV_STATE_DIR = "SIMHOST_STATE_DIR"


@dataclass(frozen=True)
class ServerState:
    pid: int
    port: int
    memory_used_mib: List[float]  # per GPU
    utilization_pct: List[float]  # per GPU


def state_dir(environ: Mapping[str, str], host_config: Optional[str] = None) -> str:
    """$SIMHOST_STATE_DIR, else a folder beside the --host-config file (each emulated host has
    its own GPUs: two on one machine must not see each other's servers), else a per-user
    folder under the system temp dir."""
    configured = environ.get(ENV_STATE_DIR)
    if configured:
        return configured
    if host_config:
        return os.path.join(os.path.dirname(os.path.abspath(host_config)), "simhost-state")
    return os.path.join(tempfile.gettempdir(), "simhost-state-{}".format(os.getuid()))


def state_path(directory: str, pid: int) -> str:
    return os.path.join(directory, "serve-{}.json".format(pid))


def write_state(directory: str, state: ServerState) -> str:
    os.makedirs(directory, exist_ok=True)
    path = state_path(directory, state.pid)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(state.__dict__, handle)
    os.replace(temporary, path)  # readers never see half a file
    return path


def remove_state(directory: str, pid: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(state_path(directory, pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _parse(path: str) -> ServerState:
    with open(path, encoding="utf-8") as handle:
        data: Dict[str, Any] = json.load(handle)
    return ServerState(
        pid=int(data["pid"]),
        port=int(data["port"]),
        memory_used_mib=[float(v) for v in data["memory_used_mib"]],
        utilization_pct=[float(v) for v in data["utilization_pct"]],
    )


def read_live_states(directory: str) -> List[ServerState]:
    """States of servers still running; unreadable or stale files are skipped."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    states = []
    for name in names:
        if not (name.startswith("serve-") and name.endswith(".json")):
            continue
        try:
            state = _parse(os.path.join(directory, name))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(state.pid):
            states.append(state)
    return states
