"""A vendor's fleet of soaks on real Celery workers and beat (docs/soak.md "Scale: a fleet").

N running G4 soaks (default 1,000) in a throwaway PostgreSQL database, each on a host of its own
(a Host row holding the lease) and each with an agent data directory that gets a new 10 s window
(raw files and line) every 10 s, all behind one loopback sshd. For each worker configuration (1,
2 and 4 processes: `celery worker --queues ticks --concurrency P`, pinned with taskset to a fixed
set of CPUs, the same for every configuration) it starts the worker and a real beat, lets them
run, and measures from each tick task's record (bench/soak_fleet_app.py):

- lateness: when a tick claimed its soak minus when that tick was due (the soak's first due time,
  then its last tick's release + TOLLGATE_SOAK_TICK_S), p50 / p99 / max;
- the share of due ticks started within their 30 s window (before the next one was due), and
  within one beat sweep (10 s);
- duplicates: a claimed tick before its due time (must be 0), and the messages the claim dropped;
- the ticks queue's depth every second; CPU per tick: the worker processes', the host side's
  (sshd and every `soak-read`), PostgreSQL's backends for the bench's database.

One JSON line per configuration, then a side-by-side table. The sshd, the beat and this process
run on the other CPUs (the hosts' side: on a real fleet each soak's read runs on its own host).

    .venv/bin/python bench/soak_fleet.py [--soaks 1000] [--workers 1,2,4] [--seconds 180]

DATABASE_URL names the PostgreSQL server (a fresh test_<name> database, dropped at the end;
default postgres://postgres@127.0.0.1:5432/tollgate_bench); CELERY_BROKER_URL a Redis database
of the bench's own, flushed before and after each configuration (default
redis://127.0.0.1:6379/12).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.soak_common import (  # noqa: E402
    WINDOW_S,
    append_window,
    configure,
    raw_sources,
    soak_dir,
    window_line,
)
from bench.soak_fleet_figures import print_table  # noqa: E402
from bench.soak_fleet_run import Fleet, measure_configuration  # noqa: E402

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/tollgate_bench"
DEFAULT_BROKER = "redis://127.0.0.1:6379/12"


class Feeder(threading.Thread):
    """The agents: every soak gets its next window once its end has passed (raw files first,
    then the line), each soak's windows contiguous from its own start."""

    def __init__(self, run_dirs: list[Path], epochs: list[float], scratch: Path) -> None:
        super().__init__(daemon=True)
        self.run_dirs, self.epochs = run_dirs, epochs
        groups = range(0, len(run_dirs), 10)
        self.sources = [raw_sources(scratch / "raw-sources" / str(group)) for group in groups]
        self.next_seq = [0] * len(run_dirs)
        self.stopped = threading.Event()

    def feed_once(self) -> None:
        now = time.time()
        for i, run_dir in enumerate(self.run_dirs):
            while self.epochs[i] + (self.next_seq[i] + 1) * WINDOW_S <= now:
                seq = self.next_seq[i]
                start = self.epochs[i] + seq * WINDOW_S
                line = window_line(seq, start=start)
                append_window(run_dir, line, link_to=self.sources[i // 10])
                self.next_seq[i] = seq + 1

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            self.feed_once()


def host_agent_pid_file(run_dir: Path) -> None:
    """The agent's wrapper status (runners/transport/detached.py reads it): this process stands
    in for every agent, alive for the whole bench."""
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    start_ticks = stat.rsplit(")", 1)[1].split()[19]
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    agent = run_dir / "soak-agent-1"
    agent.mkdir()
    (agent / "pid").write_text(f"{os.getpid()} {os.getpgrp()} {start_ticks} {boot}\n")
    (agent / "token").write_text("bench\n")


def parse_before_after(repeats: int = 20) -> str:
    """A window's sample (its bench result and two /metrics pages) as each tick makes it, with
    the pages read by prometheus_client alone (before) and by the line reader (now), same run."""
    from unittest import mock

    from bench.soak_common import RAW_FILES
    from runners.adapters import vllm_metrics
    from runners.soak import collector

    window = collector.Window(
        window_line(0), {name: path.read_bytes() for name, path in RAW_FILES.items()}
    )
    timings = {}
    for label, fast in (("before", lambda text: None), ("now", vllm_metrics._plain_samples)):
        with mock.patch.object(vllm_metrics, "_plain_samples", fast):
            began = time.process_time()
            for _ in range(repeats):
                collector.window_sample(window)
            timings[label] = 1000 * (time.process_time() - began) / repeats
    return (
        f"a window's sample (bench result, two /metrics pages): {timings['before']:.1f} ms CPU "
        f"with prometheus_client's parser alone, {timings['now']:.1f} ms with the line reader "
        f"({timings['before'] / timings['now']:.1f}x), load {os.getloadavg()[0]:.1f}"
    )


def cpu_sets(worker_cpus: str | None) -> tuple[str, str]:
    """The workers' CPUs and the rest (sshd, beat, this process), as taskset lists."""
    cpus = sorted(os.sched_getaffinity(0))
    if worker_cpus is None:
        worker_cpus = str(cpus[-1]) if len(cpus) > 1 else str(cpus[0])
    chosen = {int(part) for part in worker_cpus.split(",")}
    rest = [cpu for cpu in cpus if cpu not in chosen] or cpus
    return ",".join(str(cpu) for cpu in sorted(chosen)), ",".join(str(cpu) for cpu in rest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soaks", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4", help="worker processes per configuration")
    parser.add_argument("--seconds", type=float, default=180.0, help="measured, per configuration")
    parser.add_argument(
        "--warmup", type=float, default=60.0, help="seconds first (each process connects)"
    )
    parser.add_argument(
        "--beat-every", type=int, default=30, help="TOLLGATE_BEAT_EVERY_S (sweeps: at most 10 s)"
    )
    parser.add_argument(
        "--hosts", type=int, help="SSH hosts the soaks are spread over (default: one per soak)"
    )
    parser.add_argument("--worker-cpus", help="taskset CPU list for the workers (default: last)")
    args = parser.parse_args()
    if args.soaks < 1 or args.seconds <= 0:
        parser.error("--soaks and --seconds must be positive")
    processes = [int(part) for part in args.workers.split(",")]
    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE)
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        os.environ["CELERY_BROKER_URL"] = DEFAULT_BROKER
    worker_cpus, host_cpus = cpu_sets(args.worker_cpus)
    os.sched_setaffinity(0, {int(cpu) for cpu in host_cpus.split(",")})
    from tests.sshd import loopback_sshd

    keep = os.environ.get("TOLLGATE_FLEET_KEEP")  # a folder to keep the logs and records in
    holder = tempfile.TemporaryDirectory(prefix="tollgate-fleet-", dir=keep)
    with holder if keep is None else contextlib.nullcontext(tempfile.mkdtemp(dir=keep)) as scratch:
        configure(scratch, postgres=True, keep=("CELERY_BROKER_URL",))
        hosts = Path(scratch) / "hosts"
        (Path(scratch) / "sshd").mkdir()
        with loopback_sshd(Path(scratch) / "sshd") as server:
            os.sched_setaffinity(server.process.pid, {int(c) for c in host_cpus.split(",")})
            began = time.time()
            run_dirs = [hosts / f"run-{i}" for i in range(args.soaks)]
            epochs = [began - 60 + (i % 10) for i in range(args.soaks)]
            for run_dir in run_dirs:
                soak_dir(run_dir)
                host_agent_pid_file(run_dir)
            fleet = Fleet.seed(
                server, run_dirs, epochs, names=args.hosts or args.soaks, scratch=Path(scratch)
            )
            print(
                f"{args.soaks} soaks seeded in {time.time() - began:.1f} s; workers on CPU "
                f"{worker_cpus}, sshd, beat and the agents on CPU {host_cpus}",
                flush=True,
            )
            print(parse_before_after(), flush=True)
            feeder = Feeder(run_dirs, epochs, Path(scratch))
            feeder.feed_once()
            feeder.start()
            results = []
            try:
                for count in processes:
                    result = measure_configuration(
                        fleet,
                        processes=count,
                        seconds=args.seconds,
                        warmup=args.warmup,
                        worker_cpus=worker_cpus,
                        host_cpus=host_cpus,
                        sshd_pid=server.process.pid,
                        beat_every_s=args.beat_every,
                    )
                    print(json.dumps(result), flush=True)
                    results.append(result)
            finally:
                feeder.stopped.set()
                fleet.close()
    print_table(results)
    return 0 if all(result["duplicates"] == 0 for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
