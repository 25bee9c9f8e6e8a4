"""The demo's wall time with its engagements walked one at a time and side by side: `manage.py
demo --once` for real, each run on a fresh embedded database, optionally beside CPU burners.

    python bench/demo_busy.py [--modes one-at-a-time,side-by-side] [--burners 0]
                              [--load-floor 8] [--runs 10] [--engagement NAME ...]

Prints per run its wall time, exit code, summary steps ok / failed and the load average seen
while it ran; then, per mode, how many runs reached every outcome the demo was built to show
(every summary step ok and exit 0), which steps missed and how often, and whether the load
floor held through every run; then the side-by-side time as a share of the one-at-a-time time
(medians). `--load-floor L` starts at least L burners (each is one runnable process, so the
load average settles at or above L) and waits for the 1-minute load average to reach L before
the first run. Not a test: minutes per run (docs/simhost.md, "The demo on a busy machine").
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BURN = "while True: pass"
MODES = {"one-at-a-time": ["--one-at-a-time"], "side-by-side": []}
# The settings the embedded defaults replace (as tests/gates/demo/test_demo.py does).
SETTING_NAMES = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "SECRET_KEY",
    "SECURE_SSL_REDIRECT",
    "STATIC_MANIFEST",
    "WHITENOISE_USE_FINDERS",
    "ALLOWED_HOSTS",
    "EMAIL_BACKEND",
)
LOAD_SAMPLE_S = 5.0
# The 1-minute load average takes about three minutes to settle on a new load.
LOAD_SETTLE_TIMEOUT_S = 300.0
# A demo that has not ended in this long is stuck, not slow (its runs time out at 1200 s).
DEMO_TIMEOUT_S = 3600


@dataclass
class DemoTiming:
    mode: str
    wall_s: float
    exit_code: int
    ok: int
    failed: list[str]
    loads: list[float]

    @property
    def reached_every_outcome(self) -> bool:
        return self.exit_code == 0 and self.ok > 0 and not self.failed

    def line(self) -> str:
        load = f"{min(self.loads):.1f}-{max(self.loads):.1f}" if self.loads else "?"
        return (
            f"{self.mode}: {self.wall_s:.0f} s, exit {self.exit_code}, {self.ok} steps ok, "
            f"{len(self.failed)} failed (load average {load})"
        ) + "".join(f"\n  FAIL {line}" for line in self.failed)


def embedded_env(var_dir: Path) -> dict[str, str]:
    """SQLite and a file-system broker in `var_dir`: each run starts from an empty world (a
    reused database would find the gates passed earlier and time nothing)."""
    env = {k: v for k, v in os.environ.items() if k not in SETTING_NAMES}
    env.update(DEBUG="true", TOLLGATE_VAR_DIR=str(var_dir), TOLLGATE_ENV_FILE="")
    # The host credentials are encrypted at rest: a throwaway key for a throwaway database.
    env.setdefault("TOLLGATE_ENCRYPTION_KEYS", base64.b64encode(os.urandom(32)).decode())
    return env


def summary_marks(stdout: str) -> tuple[int, list[str]]:
    """How many steps after "Demo summary:" were ok, and the failed ones' lines (none of
    either when the demo stopped earlier)."""
    if "Demo summary:\n" not in stdout:
        return 0, []
    summary = stdout.split("Demo summary:\n")[1]
    marks = re.findall(r"^  (ok|FAIL) +(.*)$", summary, flags=re.MULTILINE)
    return sum(mark == "ok" for mark, _ in marks), [line for mark, line in marks if mark != "ok"]


def time_demo(mode: str, engagements: list[str]) -> DemoTiming:
    picked = [arg for name in engagements for arg in ("--engagement", name)]
    command = [sys.executable, "manage.py", "demo", "--once", *MODES[mode], *picked]
    with tempfile.TemporaryDirectory(prefix="demo-busy-") as var_dir:
        log = Path(var_dir) / "demo.out"
        with log.open("w") as out:
            started = time.monotonic()
            process = subprocess.Popen(
                command, cwd=ROOT, env=embedded_env(Path(var_dir)), stdout=out, stderr=out
            )
            loads = _wait_sampling_load(process, deadline=started + DEMO_TIMEOUT_S)
            wall_s = time.monotonic() - started
        ok, failed = summary_marks(log.read_text(errors="replace"))
    return DemoTiming(mode, wall_s, process.returncode, ok, failed, loads)


def _wait_sampling_load(process: subprocess.Popen, *, deadline: float) -> list[float]:
    loads = []
    while process.poll() is None:
        if time.monotonic() > deadline:
            process.kill()
            break
        loads.append(os.getloadavg()[0])
        # still walking after the interval: sample the load again
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=LOAD_SAMPLE_S)
    process.wait()
    return loads


def tally(mode: str, timings: list[DemoTiming], load_floor: float) -> list[str]:
    """One mode's runs: how many reached every outcome, the steps that missed, the load."""
    mine = [timing for timing in timings if timing.mode == mode]
    reached = sum(timing.reached_every_outcome for timing in mine)
    lines = [f"{mode}: {reached}/{len(mine)} runs reached every outcome the demo shows"]
    missed = Counter(_step_name(line) for timing in mine for line in timing.failed)
    lines += [f"  missed {count}x: {step}" for step, count in missed.most_common()]
    broke = sum(timing.exit_code != 0 and not timing.failed for timing in mine)
    if broke:
        lines.append(f"  {broke} run(s) exited {', '.join(str(t.exit_code) for t in mine)}")
    loads = [load for timing in mine for load in timing.loads]
    if loads:
        held = "held" if min(loads) >= load_floor else "NOT held"
        lines.append(
            f"  load average {min(loads):.1f}-{max(loads):.1f} (floor {load_floor:g} {held})"
        )
    return lines


def _step_name(line: str) -> str:
    """A summary line's step, without the figures that differ run to run."""
    return line.split(": ", 1)[0].strip()  # the command prints "name: detail"


def wait_for_load(floor: float) -> float:
    """Block until the 1-minute load average reaches `floor` (or the settle timeout)."""
    deadline = time.monotonic() + LOAD_SETTLE_TIMEOUT_S
    while os.getloadavg()[0] < floor and time.monotonic() < deadline:
        time.sleep(LOAD_SAMPLE_S)
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="one-at-a-time,side-by-side")
    parser.add_argument("--burners", type=int, default=0, help="CPU burner processes beside")
    parser.add_argument(
        "--load-floor", type=float, default=0.0, help="keep the load average at least this"
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of each mode")
    parser.add_argument("--engagement", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    modes = args.modes.split(",")
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        parser.error(f"unknown mode {', '.join(unknown)}: known {', '.join(MODES)}")
    count = max(args.burners, int(args.load_floor + 0.999))
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]
    timings = []
    try:
        if args.load_floor:
            print(f"load average {wait_for_load(args.load_floor):.1f} with {count} burners")
        for run in range(args.runs):
            for mode in modes:
                timings.append(time_demo(mode, args.engagement))
                print(f"run {run + 1}, {timings[-1].line()}", flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    for mode in modes:
        print("\n".join(tally(mode, timings, args.load_floor)))
    walls = {mode: statistics.median(t.wall_s for t in timings if t.mode == mode) for mode in modes}
    if len(walls) == 2:
        share = walls["side-by-side"] / walls["one-at-a-time"]
        print(f"side by side takes {share:.0%} of one at a time (medians)")


if __name__ == "__main__":
    main()
