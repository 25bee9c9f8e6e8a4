"""Detached processes on a host: the run-directory layout, its POSIX sh scripts, and the
launch / status / kill / cleanup operations both transports build on their own `run`.

Imports no paramiko and no Django; the scripts need only sh, /proc and the usual utilities.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Self

from runners.commands import PLACEHOLDERS, KindError
from runners.errors import InfrastructureError, SpecError
from runners.transport.capture import DEFAULT_CAPTURE_BYTES, LineCallback
from runners.transport.types import CommandResult, DetachedStatus, KillResult, Launch

_TOKEN = re.compile(r"[A-Za-z0-9._-]{1,128}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SCRIPT_TIMEOUT = 30.0
DEFAULT_KILL_GRACE = 10.0

# Shared sh functions. /proc/PID/stat is parsed after the last ")" because the command name
# may hold spaces; zombies count as dead (a container's init may never reap them).
_FUNCTIONS = r"""
proc_info() {
  p_state= p_pgrp= p_start=
  { read -r p_line < "/proc/$1/stat"; } 2>/dev/null || return 1
  p_rest=${p_line##*) }
  set -- $p_rest
  p_state=$1 p_pgrp=$3 p_start=${20}
}
group_alive() {
  g_id=$1
  for g_file in /proc/[0-9]*/stat; do
    { read -r g_line < "$g_file"; } 2>/dev/null || continue
    g_rest=${g_line##*) }
    set -- $g_rest
    [ "$3" = "$g_id" ] && [ "$1" != Z ] && [ "$1" != X ] && return 0
  done
  return 1
}
uptime_now() { read -r u_now _ < /proc/uptime; u_int=${u_now%.*}; }
nap() { sleep 0.1 2>/dev/null || sleep 1; }
gone_within() {
  uptime_now; w_until=$((u_int + $2))
  while group_alive "$1"; do uptime_now; [ "$u_int" -ge "$w_until" ] && return 1; nap; done
}
fact() { if { read -r f_value < "$2"; } 2>/dev/null; then echo "$1=$f_value"; fi; }
report() {
  if [ ! -d "$1" ]; then echo "exists=0"; return 0; fi
  echo "exists=1"
  fact token "$1/token"
  fact boot_now /proc/sys/kernel/random/boot_id
  uptime_now; echo "uptime=$u_now"
  if { read -r r_pid r_pgid r_start r_boot < "$1/pid"; } 2>/dev/null; then
    echo "pid=$r_pid"; echo "pgid=$r_pgid"; echo "start=$r_start"; echo "boot=$r_boot"
    proc_info "$r_pid" && echo "now_state=$p_state" && echo "now_start=$p_start"
    group_alive "$r_pgid" && echo "group_alive=1"
  fi
  fact heartbeat "$1/heartbeat"
  fact exit_code "$1/exit_code"
}
"""

# Runs as its own session and process-group leader (setsid), so its pid is the group id.
WRAPPER_SCRIPT = (
    _FUNCTIONS
    + r"""
dir=$1 beat=$2; shift 2
cd "$dir" || exit 70
beat_once() { read -r b_up _ < /proc/uptime; echo "$b_up" > heartbeat; }
beat_once
proc_info $$
read -r boot < /proc/sys/kernel/random/boot_id
printf '%s %s %s %s\n' "$$" "$p_pgrp" "$p_start" "$boot" > pid.tmp && mv -f pid.tmp pid
"$@" < /dev/null >> stdout.log 2>> stderr.log &
child=$!
(
  # TERM may land between forking sleep and learning its pid, so re-check after the fork;
  # and a sleep not yet exec'd would swallow a TERM, so it gets KILL.
  stop= nap_pid=
  trap 'stop=1; kill -s KILL "$nap_pid" 2>/dev/null' TERM
  while [ -z "$stop" ]; do
    beat_once; sleep "$beat" & nap_pid=$!
    [ -n "$stop" ] && kill -s KILL "$nap_pid" 2>/dev/null
    wait "$nap_pid"
  done
) < /dev/null > /dev/null 2>&1 &
beater=$!
got=
trap 'got=1' TERM INT
wait "$child"; code=$?
while [ -n "$got" ]; do got=; wait "$child"; code=$?; done
kill "$beater" 2>/dev/null; wait "$beater"
printf '%s\n' "$code" > exit_code.tmp && mv -f exit_code.tmp exit_code
"""
)

LAUNCH_SCRIPT = (
    _FUNCTIONS
    + r"""
wrapper=$1 dir=$2 token=$3 beat=$4; shift 4
fail() { echo "error=$*"; exit 0; }
# The run directory may already hold uploaded inputs; mkdir of launch.lock is the atomic
# claim, so of two racing launches exactly one starts the process.
mkdir -p "$dir" 2> /dev/null || fail "cannot create $dir"
if mkdir "$dir/launch.lock" 2> /dev/null; then
  printf '%s\n' "$token" > "$dir/token.tmp" && mv -f "$dir/token.tmp" "$dir/token" \
    || fail "cannot write the launch token in $dir"
  printf '%s\n' "$wrapper" > "$dir/wrapper.sh" || fail "cannot write $dir/wrapper.sh"
  cd "$dir" || fail "cannot enter $dir"
  if command -v setsid > /dev/null 2>&1; then
    setsid nohup /bin/sh "$dir/wrapper.sh" "$dir" "$beat" "$@" \
      < /dev/null >> "$dir/wrapper.log" 2>&1 &
  else
    nohup python3 -c 'import os, sys; os.setsid(); os.execv("/bin/sh", ["sh"] + sys.argv[1:])' \
      "$dir/wrapper.sh" "$dir" "$beat" "$@" < /dev/null >> "$dir/wrapper.log" 2>&1 &
  fi
  echo "launch=started"
else
  [ -d "$dir/launch.lock" ] || fail "$dir/launch.lock exists and is not a directory"
  n=0; while [ ! -s "$dir/token" ] && [ "$n" -lt 50 ]; do nap; n=$((n + 1)); done
  { read -r have < "$dir/token"; } 2> /dev/null || fail "$dir exists without a launch token"
  if [ "$have" != "$token" ]; then echo "launch=conflict"; report "$dir"; exit 0; fi
  echo "launch=adopted"
fi
n=0; while [ ! -r "$dir/pid" ] && [ "$n" -lt 100 ]; do nap; n=$((n + 1)); done
report "$dir"
"""
)

STATUS_SCRIPT = _FUNCTIONS + '\nreport "$1"\n'

KILL_SCRIPT = (
    _FUNCTIONS
    + r"""
dir=$1 grace=$2
{ read -r k_pid k_pgid k_start k_boot < "$dir/pid"; } 2> /dev/null || { echo "kill=none"; exit 0; }
read -r now_boot < /proc/sys/kernel/random/boot_id
[ "$k_boot" = "$now_boot" ] || { echo "kill=none"; exit 0; }
# A live leader pid with another start time was reused: our group is gone (a pid stays
# allocated while any process of its group lives), so there is nothing of ours to signal.
if proc_info "$k_pid" && [ "$p_start" != "$k_start" ]; then echo "kill=none"; exit 0; fi
# A finished run's wrapper may still be exiting: give it a moment before signalling.
[ -e "$dir/exit_code" ] && gone_within "$k_pgid" 2 && { echo "kill=none"; exit 0; }
group_alive "$k_pgid" || { echo "kill=none"; exit 0; }
kill -s TERM -- "-$k_pgid" 2> /dev/null; echo "sent=TERM"
if ! gone_within "$k_pgid" "$grace"; then
  kill -s KILL -- "-$k_pgid" 2> /dev/null; echo "sent=KILL"
  gone_within "$k_pgid" 5 || echo "alive=1"
fi
echo "kill=done"
"""
)

# Removes only what a launch claimed (or an empty directory): a wrong path removes nothing.
CLEANUP_SCRIPT = r"""
dir=$1
[ -e "$dir" ] || { echo "cleanup=absent"; exit 0; }
if [ -d "$dir" ] && rmdir "$dir" 2> /dev/null; then echo "cleanup=done"; exit 0; fi
[ -d "$dir/launch.lock" ] || { echo "error=$dir is not a run directory"; exit 0; }
rm -rf "$dir" && echo "cleanup=done" || echo "error=cannot remove $dir"
"""


def parse_facts(text: str) -> dict[str, str]:
    """key=value lines -> dict; a key given twice keeps the first ("sent" is read separately)."""
    facts: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in facts:
            facts[key] = value
    return facts


def status_from_facts(run_dir: str, facts: Mapping[str, str]) -> DetachedStatus:
    """Judge the wrapper from what `report` printed; a changed boot id means nothing survived."""
    if facts.get("exists") != "1":
        return DetachedStatus(run_dir=run_dir, exists=False)
    boot, boot_now = facts.get("boot"), facts.get("boot_now")
    rebooted = bool(boot and boot_now and boot != boot_now)
    alive = facts.get("now_state") not in (None, "Z", "X")
    same_process = alive and facts.get("now_start") == facts.get("start")
    exit_code = _int_or_none(facts.get("exit_code"))
    # Once the exit code is written the run is over, even while the wrapper is still exiting.
    running = same_process and not rebooted and exit_code is None
    return DetachedStatus(
        run_dir=run_dir,
        exists=True,
        token=facts.get("token"),
        pid=_int_or_none(facts.get("pid")),
        pgid=_int_or_none(facts.get("pgid")),
        start_ticks=_int_or_none(facts.get("start")),
        boot_id=boot,
        running=running,
        group_alive=facts.get("group_alive") == "1" and not rebooted,
        exit_code=exit_code,
        heartbeat_age=None if rebooted else _age(facts),
        rebooted=rebooted,
    )


def _age(facts: Mapping[str, str]) -> float | None:
    try:
        return max(0.0, float(facts["uptime"]) - float(facts["heartbeat"]))
    except (KeyError, ValueError):
        return None


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def checked_run_dir(run_dir: str) -> str:
    try:
        return PLACEHOLDERS["run_dir"].check(run_dir)
    except KindError as problem:
        raise SpecError(str(problem), field="run_dir") from None


def launch_argv(
    run_dir: str,
    token: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    heartbeat_seconds: int = 2,
) -> list[str]:
    """The validated argv of one launch: sh runs LAUNCH_SCRIPT, which starts WRAPPER_SCRIPT."""
    checked_run_dir(run_dir)
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise SpecError("must be 1-128 letters, digits or ._-", field="token")
    if isinstance(heartbeat_seconds, bool) or not 1 <= heartbeat_seconds <= 300:
        raise SpecError("must be an integer from 1 to 300", field="heartbeat_seconds")
    if isinstance(argv, str) or not argv:
        raise SpecError("a command must be a non-empty list of arguments", field="argv")
    head = ["/bin/sh", "-c", LAUNCH_SCRIPT, "tollgate-launch", WRAPPER_SCRIPT, run_dir, token]
    return [*head, str(int(heartbeat_seconds)), *_env_prefix(env, argv), *argv]


def _env_prefix(env: Mapping[str, str] | None, argv: Sequence[str]) -> list[str]:
    if not env:
        return []
    for name in env:
        if not _ENV_NAME.fullmatch(name):
            raise SpecError(f"{name[:40]!r} is not a variable name", field="env")
    # env(1) would read a first argument containing "=" as one more assignment.
    if "=" in argv[0]:
        raise SpecError("the program name must not contain '=' when env is given", field="argv")
    return ["/usr/bin/env", *(f"{name}={value}" for name, value in env.items())]


class DetachedProcesses:
    """The context manager and launch / status / kill / cleanup for any transport that can run
    a command."""

    host: str

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        on_line: LineCallback | None = None,
        max_bytes: int = DEFAULT_CAPTURE_BYTES,
    ) -> CommandResult:
        raise NotImplementedError

    def launch_detached(
        self,
        run_dir: str,
        token: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        heartbeat_seconds: int = 2,
    ) -> Launch:
        """Start argv detached in run_dir, or adopt what an earlier launch with `token` started."""
        command = launch_argv(run_dir, token, argv, env=env, heartbeat_seconds=heartbeat_seconds)
        facts = self._script(command, step=f"launch {run_dir}", timeout=SCRIPT_TIMEOUT + 30)
        status = status_from_facts(run_dir, facts)
        if facts.get("launch") == "conflict":
            raise InfrastructureError(
                f"{run_dir} belongs to another launch (token {status.token!r}); clean it up "
                "or use a new run directory",
                permanent=True,
                host=self.host,
                step=f"launch {run_dir}",
            )
        if status.pid is None:
            raise InfrastructureError(
                f"the wrapper did not record its pid within 10 s (see {run_dir}/wrapper.log); "
                "clean up the run directory before launching again",
                host=self.host,
                step=f"launch {run_dir}",
            )
        return Launch(adopted=facts.get("launch") == "adopted", status=status)

    def status(self, run_dir: str) -> DetachedStatus:
        command = ["/bin/sh", "-c", STATUS_SCRIPT, "tollgate-status", checked_run_dir(run_dir)]
        return status_from_facts(run_dir, self._script(command, step=f"status {run_dir}"))

    def kill(self, run_dir: str, *, grace: float = DEFAULT_KILL_GRACE) -> KillResult:
        """TERM the whole process group, KILL it after `grace` seconds, and verify it is gone."""
        seconds = max(0, min(int(grace), 50))
        command = ["/bin/sh", "-c", KILL_SCRIPT, "tollgate-kill", checked_run_dir(run_dir)]
        result = self.run([*command, str(seconds)], timeout=seconds + SCRIPT_TIMEOUT)
        self._require_success(result, step=f"kill {run_dir}")
        signals = tuple(line[5:] for line in result.stdout.splitlines() if line.startswith("sent="))
        if parse_facts(result.stdout).get("alive") == "1":
            raise InfrastructureError(
                "the process group survived SIGKILL", host=self.host, step=f"kill {run_dir}"
            )
        return KillResult(run_dir=run_dir, signals=signals)

    def cleanup(self, run_dir: str) -> None:
        """Kill whatever still runs there, then remove the run directory."""
        self.kill(run_dir)
        command = ["/bin/sh", "-c", CLEANUP_SCRIPT, "tollgate-cleanup", checked_run_dir(run_dir)]
        self._script(command, step=f"cleanup {run_dir}")

    def _script(
        self, command: list[str], *, step: str, timeout: float = SCRIPT_TIMEOUT
    ) -> dict[str, str]:
        result = self.run(command, timeout=timeout)
        self._require_success(result, step=step)
        facts = parse_facts(result.stdout)
        # The scripts report what they found on the host's disk (a missing directory, a
        # permission): retrying will not change it.
        if "error" in facts:
            raise InfrastructureError(facts["error"], permanent=True, host=self.host, step=step)
        return facts

    def _require_success(self, result: CommandResult, *, step: str) -> None:
        if result.exit_code != 0:
            detail = result.stderr.strip()[-500:] or "no output on stderr"
            raise InfrastructureError(
                f"the script exited with {result.exit_code}: {detail}", host=self.host, step=step
            )
