"""What a run leaves on its host, and removing it: the process groups it launched (found by
their launch tokens, killed and verified gone) and its run directory (removed unless kept for
inspection). Used when a run ends, and by the janitor that retries a cleanup which could not
reach the host. Imports no Django.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runners.commands import PLACEHOLDERS, KindError
from runners.errors import RunnerError, SpecError
from runners.transport import Transport

logger = logging.getLogger(__name__)

# Written by the prepare step before anything else: only a directory holding the run's own
# token in it is ever removed, so a wrong path removes nothing.
MARKER = ".tollgate-run"
KILL_GRACE_S = 5.0
SCRIPT_TIMEOUT_S = 60

# Every launched directory (it holds launch.lock) under the run directory, with its token.
# Constant scripts: paths arrive as arguments, never as code.
LIST_SCRIPT = r"""
for d in "$1"/*/; do
  [ -d "${d}launch.lock" ] || continue
  { read -r t < "${d}token"; } 2> /dev/null || t=
  printf 'launched=%s %s\n' "$t" "${d%/}"
done
"""

REMOVE_SCRIPT = r"""
dir=$1 token=$2
[ -e "$dir" ] || { echo "removed=absent"; exit 0; }
{ read -r have < "$dir/.tollgate-run"; } 2> /dev/null \
  || { echo "kept=$dir has no Tollgate run marker"; exit 0; }
[ "$have" = "$token" ] || { echo "kept=$dir belongs to another run"; exit 0; }
rm -rf -- "$dir" && echo "removed=done" || echo "kept=cannot remove $dir"
"""


@dataclass(frozen=True)
class HostLeftovers:
    """A run's place on its host: `token` is the run's launch token, the prefix of every
    launch token of its processes; `launched_dirs` those the database knows of."""

    run_dir: str
    token: str
    keep_run_dir: bool = False
    launched_dirs: tuple[str, ...] = ()

    def with_launched(self, run_dirs: list[str]) -> HostLeftovers:
        return HostLeftovers(self.run_dir, self.token, self.keep_run_dir, tuple(run_dirs))


def clean_up(transport: Transport, leftovers: HostLeftovers) -> list[str]:
    """Stop every process group the run launched, then remove its run directory (unless kept).

    Returns the problems met; empty when nothing of the run is left running. Never raises a
    RunnerError: the first failure ends the attempt (an unreachable host fails every command
    alike, and a directory whose processes still run must keep their pid files).
    """
    try:
        for run_dir in launched_dirs(transport, leftovers):
            transport.kill(run_dir, grace=KILL_GRACE_S)
        if not leftovers.keep_run_dir:
            remove_run_dir(transport, leftovers)
    except RunnerError as error:
        logger.warning("cleanup of %s: %s", leftovers.run_dir, error)
        return [f"could not clean up {leftovers.run_dir}: {error}"]
    return []


def launched_dirs(transport: Transport, leftovers: HostLeftovers) -> list[str]:
    """The known launched directories and those found on the host with one of the run's launch
    tokens: a launch whose answer was lost to an outage is found this way too."""
    argv = ["/bin/sh", "-c", LIST_SCRIPT, "tollgate-list", _checked(leftovers.run_dir)]
    result = transport.run(argv, timeout=SCRIPT_TIMEOUT_S)
    found = list(leftovers.launched_dirs)
    for line in result.stdout.splitlines():
        token, _, path = line.removeprefix("launched=").partition(" ")
        ours = line.startswith("launched=") and token.startswith(f"{leftovers.token}-")
        if ours and _plain_run_dir(path) and path not in found:
            found.append(path)
    return found


def remove_run_dir(transport: Transport, leftovers: HostLeftovers) -> None:
    run_dir = _checked(leftovers.run_dir)
    argv = ["/bin/sh", "-c", REMOVE_SCRIPT, "tollgate-remove", run_dir, leftovers.token]
    result = transport.run(argv, timeout=SCRIPT_TIMEOUT_S)
    for line in result.stdout.splitlines():
        if line.startswith("kept="):
            logger.warning("run directory left in place: %s", line.removeprefix("kept="))


def _checked(run_dir: str) -> str:
    try:
        return PLACEHOLDERS["run_dir"].check(run_dir)
    except KindError as problem:
        raise SpecError(str(problem), field="run_dir") from None


def _plain_run_dir(path: str) -> bool:
    try:
        PLACEHOLDERS["run_dir"].check(path)
    except KindError:
        return False
    return True
