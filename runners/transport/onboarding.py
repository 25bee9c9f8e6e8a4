"""Host onboarding: the "test connection" check a person runs after pinning a host key.

Imports no paramiko (it goes through the SSH transport) and no Django.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runners.errors import InfrastructureError, RunnerError, SpecError
from runners.transport import ssh as ssh_transport
from runners.transport.network import STEP_AUTH, STEP_TCP
from runners.transport.types import CheckResult, ConnectionReport, SshTarget

PROBE_TIMEOUT = 30.0
MIN_PYTHON = (3, 6)  # the host-side helpers are written for 3.6+
_TOOL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,63}|(?:/[A-Za-z0-9._+-]+)+")
_RUN_DIR = re.compile(r"(?:/[A-Za-z0-9._+-]+)+")
# One literal word full of shell syntax: it comes back intact only if the login shell
# parses shlex.quote output the POSIX way (fish or csh would not).
QUOTING_PROBE = 'it\'s "$(id)" `id` ; | & $HOME \\ \u00e9'

_PROBE_SCRIPT = r"""
printf 'quoting=%s\n' "$1"; run_dir=$2; shift 2
if [ -n "$run_dir" ]; then
  if mkdir -p -- "$run_dir" 2> /dev/null && probe=$(mktemp "$run_dir/.tollgate-probe.XXXXXX"); then
    rm -f -- "$probe"; echo "run_dir=ok"
  else echo "run_dir=fail"; fi
fi
if command -v python3 > /dev/null 2>&1; then
  echo "python3=$(python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1)"
else
  echo "python3="
fi
for tool; do
  if command -v "$tool" > /dev/null 2>&1; then echo "tool=ok $tool"
  else echo "tool=missing $tool"; fi
done
"""

# Which check a connection failure belongs to; the checks before it passed.
_CONNECT_CHECKS = ("reachable", "host key", "authentication")
_CHECK_OF_STEP = {
    STEP_TCP: "reachable",
    ssh_transport.STEP_HANDSHAKE: "reachable",
    ssh_transport.STEP_HOST_KEY: "host key",
    STEP_AUTH: "authentication",
}


def check_connection(
    target: SshTarget, required_tools: Sequence[str] = (), run_dir: str | None = None
) -> ConnectionReport:
    """Reachable, host key, authentication, POSIX quoting, python3, the run directory
    writable (when one is given), then each tool.

    An expected failure is a failed check with a message, never an exception; only a bad
    `required_tools` entry or run directory (a bug in the profile or host) raises SpecError.
    """
    tools = _checked_tools(required_tools)
    if run_dir is not None and not _RUN_DIR.fullmatch(run_dir):
        raise SpecError("must be an absolute path of plain names", field="run_root")
    with ssh_transport.open_transport(target) as transport:
        try:
            transport.connect()
        except RunnerError as problem:
            return ConnectionReport(target.name, _connect_failure(problem))
        checks = [CheckResult(name, True, "ok") for name in _CONNECT_CHECKS]
        probe_args = [QUOTING_PROBE, run_dir or "", *tools]
        command = ["/bin/sh", "-c", _PROBE_SCRIPT, "tollgate-probe", *probe_args]
        try:
            result = transport.run(command, timeout=PROBE_TIMEOUT)
        except RunnerError as problem:
            checks.append(CheckResult("probe", False, str(problem)))
            return ConnectionReport(target.name, tuple(checks))
    return ConnectionReport(target.name, (*checks, *_probe_checks(result.stdout, tools)))


def _checked_tools(required_tools: Sequence[str]) -> list[str]:
    if isinstance(required_tools, str):
        raise SpecError("must be a list of tool names", field="required_tools")
    for tool in required_tools:
        if not isinstance(tool, str) or not _TOOL.fullmatch(tool):
            raise SpecError(f"{str(tool)[:40]!r} is not a tool name", field="required_tools")
    return list(required_tools)


def _connect_failure(problem: RunnerError) -> tuple[CheckResult, ...]:
    if isinstance(problem, SpecError):
        return (CheckResult("private key", False, str(problem)),)  # nothing was tried
    failed = _CHECK_OF_STEP.get(problem.step or "", "reachable")
    checks: list[CheckResult] = []
    for name in _CONNECT_CHECKS:
        if name == failed:
            checks.append(CheckResult(name, False, _failure_message(problem)))
            break
        checks.append(CheckResult(name, True, "ok"))
    return tuple(checks)


def _failure_message(problem: RunnerError) -> str:
    if isinstance(problem, InfrastructureError) and not problem.permanent:
        return f"{problem} (transient: retry later)"
    return str(problem)


def _probe_checks(stdout: str, tools: list[str]) -> list[CheckResult]:
    lines = stdout.splitlines()
    facts = dict(
        line.split("=", 1) for line in lines if "=" in line and not line.startswith("tool=")
    )
    quoting_ok = facts.get("quoting") == QUOTING_PROBE
    checks = [
        CheckResult(
            "posix shell",
            quoting_ok,
            "ok" if quoting_ok else "the login shell does not parse POSIX quoting: use sh or bash",
        ),
        _python_check(facts.get("python3", "")),
    ]
    if "run_dir" in facts:
        writable = facts["run_dir"] == "ok"
        message = "ok" if writable else "cannot create a file there: check its owner and mode"
        checks.append(CheckResult("run directory writable", writable, message))
    found = {line[len("tool=ok ") :] for line in lines if line.startswith("tool=ok ")}
    for tool in tools:
        present = tool in found
        checks.append(
            CheckResult(f"tool {tool}", present, "ok" if present else "not found on PATH")
        )
    return checks


def _python_check(version: str) -> CheckResult:
    try:
        found = tuple(int(part) for part in version.split("."))
    except ValueError:
        return CheckResult("python3", False, "python3 not found on PATH")
    if found < MIN_PYTHON:
        needed = ".".join(map(str, MIN_PYTHON))
        return CheckResult("python3", False, f"python3 {version} is older than {needed}")
    return CheckResult("python3", True, f"python3 {version}")
