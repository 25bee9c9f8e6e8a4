"""The transport interface and its value types: targets, command results, detached-process
status. Pure data and a Protocol; imports no paramiko and no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

from runners.commands import PLACEHOLDERS, KindError
from runners.errors import SpecError
from runners.transport.capture import DEFAULT_CAPTURE_BYTES, LineCallback
from runners.transport.hostkeys import parse_host_key

_TARGET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@-]{0,99}")
_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class SshTarget:
    """How to reach one host. Built by the Django side from its Host row; never logged with keys.

    `host_key` is the pinned public key line ("ssh-ed25519 AAAA..."); an empty string means not
    pinned yet, and every connection is then refused. Give `private_key` (text, kept in memory
    only) or `key_path`, not both. Timeouts are in seconds.
    """

    name: str
    address: str
    username: str
    host_key: str
    port: int = 22
    private_key: str | None = field(default=None, repr=False)
    key_path: str | None = None
    key_passphrase: str | None = field(default=None, repr=False)
    connect_timeout: float = 10.0
    banner_timeout: float = 15.0
    auth_timeout: float = 15.0
    channel_timeout: float = 15.0
    keepalive_seconds: float = 15.0
    connect_attempts: int = 3

    def __post_init__(self) -> None:
        problems = _target_problems(self)
        if problems:
            problem, name = problems[0]
            raise SpecError(problem, field=name, host=str(self.name) or None, step="target")


def _target_problems(target: SshTarget) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not isinstance(target.name, str) or not _TARGET_NAME.fullmatch(target.name):
        problems.append(("must be 1-100 letters, digits or _.:@-", "name"))
    try:
        PLACEHOLDERS["host_address"].check(target.address)
    except KindError as problem:
        problems.append((str(problem), "address"))
    if not isinstance(target.username, str) or not _USER_NAME.fullmatch(target.username):
        problems.append(("must be a POSIX user name", "username"))
    if not isinstance(target.port, int) or not 1 <= target.port <= 65535:
        problems.append(("must be an integer from 1 to 65535", "port"))
    if (target.private_key is None) == (target.key_path is None):
        problems.append(("give exactly one of private_key and key_path", "private_key"))
    for name in ("connect_timeout", "banner_timeout", "auth_timeout", "channel_timeout"):
        if not 0 < getattr(target, name) <= 600:
            problems.append(("must be more than 0 and at most 600 seconds", name))
    if not 1 <= target.connect_attempts <= 10:
        problems.append(("must be from 1 to 10", "connect_attempts"))
    if target.host_key:
        try:
            parse_host_key(target.host_key)
        except SpecError as problem:
            problems.append((problem.reason.removeprefix("host_key: "), "host_key"))
    return problems


@dataclass(frozen=True)
class CommandResult:
    """One finished command. A negative exit code means it ended by a signal (-1: unknown)."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class DetachedStatus:
    """What the run directory and the process table on the host say about a detached process.

    `running`: the wrapper process is alive, with the recorded start time, since the same boot,
    and no exit code is written yet.
    `group_alive`: some process of its process group is still alive (children included).
    `heartbeat_age`: seconds since the wrapper last beat, on the host's own clock.
    """

    run_dir: str
    exists: bool
    token: str | None = None
    pid: int | None = None
    pgid: int | None = None
    start_ticks: int | None = None
    boot_id: str | None = None
    running: bool = False
    group_alive: bool = False
    exit_code: int | None = None
    heartbeat_age: float | None = None
    rebooted: bool = False

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    @property
    def vanished(self) -> bool:
        """Started, not running, and no exit code: killed, crashed, or the host rebooted."""
        return self.pid is not None and not self.running and self.exit_code is None


@dataclass(frozen=True)
class Launch:
    """The result of launch_detached: `adopted` is True when the process was already there."""

    adopted: bool
    status: DetachedStatus


@dataclass(frozen=True)
class KillResult:
    """Which signals were sent to the process group ("TERM", then "KILL" after the grace)."""

    run_dir: str
    signals: tuple[str, ...]


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    message: str


@dataclass(frozen=True)
class ConnectionReport:
    """The onboarding "test connection" result: one check per line, in the order they ran."""

    host: str
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def check(self, name: str) -> CheckResult | None:
        return next((check for check in self.checks if check.name == name), None)


class Transport(Protocol):
    """One connection to one host, reused across calls; use as a context manager.

    Not thread-safe: build one per task. Every expected failure is a RunnerError subclass.
    """

    host: str

    def __enter__(self) -> Transport: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None: ...

    def close(self) -> None: ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        on_line: LineCallback | None = None,
        max_bytes: int = DEFAULT_CAPTURE_BYTES,
    ) -> CommandResult: ...

    def put(self, local_path: str, remote_path: str) -> str: ...

    def get(self, remote_path: str, local_path: str) -> str: ...

    def read_from(
        self, path: str, offset: int, *, max_bytes: int = ..., whole_lines: bool = False
    ) -> tuple[bytes, int]: ...

    def launch_detached(
        self,
        run_dir: str,
        token: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        heartbeat_seconds: int = ...,
    ) -> Launch: ...

    def status(self, run_dir: str) -> DetachedStatus: ...

    def kill(self, run_dir: str, *, grace: float = ...) -> KillResult: ...

    def cleanup(self, run_dir: str) -> None: ...
