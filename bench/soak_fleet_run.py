"""bench/soak_fleet.py's database side and one measured configuration: the fleet's rows (one
engagement's G4 gate, a run per soak, each on a host of its own holding the lease, all hosts
reaching the same loopback sshd), real Celery worker and beat processes, and what their tick
records say. A helper of the bench, not a bench."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil

from bench.soak_common import BENCH_KEYS, ROOT, WINDOW_S
from bench.soak_fleet_figures import TICK_S, analyse


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@dataclass
class Fleet:
    run_ids: list[int]
    scratch: Path
    database_url: str
    broker_url: str

    @classmethod
    def seed(
        cls, server, run_dirs: list[Path], epochs: list[float], *, names: int, scratch: Path
    ) -> Fleet:
        from django.conf import settings
        from django.db import connection

        from gates import services
        from gates.decisions.g4_summary import summary_start
        from gates.models import Host, Organization, Profile, Run, Soak
        from gates.services.hosts.access import run_profile_snapshot
        from gates.specs import validation as specs
        from tests.simhosts import simhost_parameters

        org = Organization.objects.create(name="bench fleet", slug="fleet", kind="customer")
        system = services.Actor.system("bench")
        engagement = services.engagement_create(
            actor=system, organization=org, title="fleet", model_name="m"
        )
        gate = engagement.gates.get(kind="G4")
        document = specs.default_spec("G4")
        document["window_min"] = WINDOW_S / 60
        services.gate_spec_update(actor=system, gate=gate, document=document)
        gate.refresh_from_db()
        profile = Profile.objects.get(name="simhost")
        first = Host(
            organization=org,
            name="gpu-00000",
            address=server.address,
            port=server.port,
            username=server.username,
            host_key=server.host_key_line,
            host_key_fingerprint=services.host_key_fingerprint(server.host_key_line),
            profile=profile,
            parameters=simhost_parameters(scratch / "simhost"),
        )
        first.save()
        snapshot = run_profile_snapshot(first)
        # Soak i's host reaches the sshd as SSH host `gpu-(i mod names)`: with fewer names than
        # soaks, soaks share one (in organizations of their own: a name is unique in one), hence
        # a kept connection, as several soaks on one machine would.
        shelves = [org]
        shelves += Organization.objects.bulk_create(
            Organization(name=f"bench fleet {k}", slug=f"fleet-{k}", kind="customer")
            for k in range(1, -(-len(run_dirs) // names))
        )
        hosts = [first]
        hosts += Host.objects.bulk_create(
            Host(
                organization=shelves[i // names],
                name=f"gpu-{i % names:05d}",
                address=first.address,
                port=first.port,
                username=first.username,
                host_key=first.host_key,
                host_key_fingerprint=first.host_key_fingerprint,
                profile=profile,
                parameters=first.parameters,
            )
            for i in range(1, len(run_dirs))
        )
        for host in hosts:  # each sealed to its own row
            services.host_set_credential(host=host, private_key=server.user_key_text)
        now = datetime.now(tz=UTC)
        runs = Run.objects.bulk_create(
            Run(
                gate=gate,
                spec=gate.current_spec,
                host=host,
                attempt=i + 1,
                state=Run.State.RUNNING,
                started_at=now,
                heartbeat_at=now,
                lease_token=1,
                profile_snapshot=snapshot,
            )
            for i, host in enumerate(hosts)
        )
        for host, run in zip(hosts, runs, strict=True):
            host.lease_run, host.fencing_token, host.lease_acquired_at = run, 1, now
        Host.objects.bulk_update(hosts, ["lease_run", "fencing_token", "lease_acquired_at"])
        summary = summary_start(specs.parse_spec(dict(gate.current_spec.document), "G4"))
        Soak.objects.bulk_create(
            Soak(
                run=run,
                run_dir=str(run_dir),
                agent_sha256="0" * 64,
                started=epoch,
                deadline=epoch + 72 * 3600,
                summary=summary,
                next_tick_at=now,
            )
            for run, run_dir, epoch in zip(runs, run_dirs, epochs, strict=True)
        )
        database = connection.settings_dict
        url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/"
        return cls(
            run_ids=[run.pk for run in runs],
            scratch=scratch,
            database_url=url + database["NAME"],
            broker_url=settings.CELERY_BROKER_URL,
        )

    def reset(self, start: float) -> dict[int, float]:
        """Every soak free and due in turn over the next tick interval from `start` (a fleet in
        its steady state), its provisional verdict due at a different time each (every
        TOLLGATE_SOAK_PROVISIONAL_S); returns each soak's first due time."""
        from django.conf import settings

        from gates.models import Soak

        count = len(self.run_ids)
        due = {run_id: start + TICK_S * i / count for i, run_id in enumerate(self.run_ids)}
        every = settings.TOLLGATE_SOAK_PROVISIONAL_S
        soaks = list(Soak.objects.filter(run_id__in=self.run_ids).only("pk", "run_id"))
        for i, soak in enumerate(soaks):
            soak.next_tick_at = _when(due[soak.run_id])
            soak.tick_until = soak.poked_until = None
            soak.tick_token = ""
            soak.provisional = {"verdict": "inconclusive", "computed_at": start - every * i / count}
        Soak.objects.bulk_update(
            soaks, ["next_tick_at", "tick_until", "poked_until", "tick_token", "provisional"], 500
        )
        return due

    def flush_broker(self) -> None:
        import redis

        redis.Redis.from_url(self.broker_url).flushdb()

    def close(self) -> None:
        self.flush_broker()

    def environment(self, records: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.database_url,
            CELERY_BROKER_URL=self.broker_url,
            TOLLGATE_FLEET_RECORDS=str(records),
            TOLLGATE_VAR_DIR=str(self.scratch),
            TOLLGATE_ENV_FILE="",
            TOLLGATE_ENCRYPTION_KEYS=BENCH_KEYS,
            DJANGO_SETTINGS_MODULE="config.settings",
            PYTHONPATH=str(ROOT),
        )
        env.pop("CACHE_URL", None)
        return env


def _spawn(command: list[str], cpus: str, env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            ["taskset", "-c", cpus, *command],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen, grace: float = 10.0) -> None:
    """QUIT the process (Celery's cold shutdown: the measuring is over, a tick cut short only
    keeps its claim), then KILL its own group, whatever interrupted the wait: no worker is
    ever left running."""
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGQUIT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def _tree_cpu(pid: int, *, with_children_of_exited: bool = True) -> float:
    """CPU seconds of a process and its live descendants (and of the exited ones they reaped)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
        if with_children_of_exited:
            total += times.children_user + times.children_system
    return total


def _postgres_cpu(database: str) -> float:
    """CPU seconds of the PostgreSQL backends serving `database` (their command line names it)."""
    total = 0.0
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if line.startswith("postgres:") and f" {database} " in f"{line} ":
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


class QueueWatch(threading.Thread):
    """The ticks queue's depth (messages waiting in Redis), once a second."""

    def __init__(self, broker_url: str) -> None:
        import redis

        super().__init__(daemon=True)
        self.redis = redis.Redis.from_url(broker_url)
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            self.samples.append((time.time(), int(self.redis.llen("ticks"))))


def _ready(log: Path, name: str, deadline: float, worker: subprocess.Popen) -> bool:
    """Wait for the worker's "ready" line (it has forked its pool processes then)."""
    while time.time() < deadline and worker.poll() is None:
        if log.exists() and f"{name} ready." in log.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


def measure_configuration(
    fleet: Fleet,
    *,
    processes: int,
    seconds: float,
    warmup: float,
    worker_cpus: str,
    host_cpus: str,
    sshd_pid: int,
    beat_every_s: int,
) -> dict:
    from django.db import connection

    records = fleet.scratch / f"records-{processes}"
    records.mkdir()
    env = fleet.environment(records)
    fleet.flush_broker()
    fleet.reset(time.time() + 3600)  # none due until the worker is ready
    name = f"fleet{processes}@bench"
    log = fleet.scratch / f"worker-{processes}.log"
    beat = _spawn(
        [
            *(sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"),
            *("--schedule", str(fleet.scratch / f"beat-{processes}")),
        ],
        host_cpus,
        {**env, "TOLLGATE_BEAT_EVERY_S": str(beat_every_s)},
        fleet.scratch / f"beat-{processes}.log",
    )
    worker = _spawn(
        [
            *(sys.executable, "-m", "celery", "-A", "bench.soak_fleet_app", "worker"),
            *("--loglevel", "INFO", "--concurrency", str(processes), "--queues", "ticks"),
            *("--without-gossip", "--without-mingle", "--hostname", name),
        ],
        worker_cpus,
        env,
        log,
    )
    try:
        if not _ready(log, name, time.time() + 120, worker):
            raise RuntimeError(f"the worker is not ready; its log ends:\n{log.read_text()[-3000:]}")
        load_start = os.getloadavg()[0]
        start = time.time() + 2
        due = fleet.reset(start)
        sshd_before = _tree_cpu(sshd_pid)
        worker_before = _tree_cpu(worker.pid, with_children_of_exited=False)
        postgres_before = _postgres_cpu(connection.settings_dict["NAME"])
        watch = QueueWatch(fleet.broker_url)
        watch.start()
        end = start + warmup + seconds
        while time.time() < end:
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited {worker.returncode}")
            time.sleep(min(1.0, max(end - time.time(), 0)))
        worker_cpu = _tree_cpu(worker.pid, with_children_of_exited=False) - worker_before
        postgres_cpu = _postgres_cpu(connection.settings_dict["NAME"]) - postgres_before
        load_end = os.getloadavg()[0]
        watch.stopped.set()
    finally:
        _stop(beat)
        _stop(worker)
    sshd_cpu = _sshd_cpu_after_close(sshd_pid) - sshd_before
    ticks = _read_records(records)
    failed = [tick for tick in ticks if tick.get("state") != "SUCCESS"]
    if failed:
        print(f"{len(failed)} tick task(s) failed, the first: {failed[0].get('error')}")
    sweep_s = min(beat_every_s, 10.0)  # config/queues.py: tick-soaks
    result = analyse(ticks, due, start=start, warmup=warmup, end=end, sweep_s=sweep_s)
    claimed = max(result["claimed_all"], 1)
    cpus = len(worker_cpus.split(","))
    result.update(
        processes=processes,
        soaks=len(fleet.run_ids),
        seconds=seconds,
        warmup_s=warmup,
        worker_cpus=worker_cpus,
        queue_depth_max_end=(
            f"{max((d for _, d in watch.samples), default=0)} / "
            f"{watch.samples[-1][1] if watch.samples else 0}"
        ),
        queue_depth_every_10s=[depth for _, depth in watch.samples[::10]],
        worker_cpu_ms_per_tick=1000 * worker_cpu / claimed,
        host_cpu_ms_per_tick=1000 * sshd_cpu / claimed,
        postgres_cpu_ms_per_tick=1000 * postgres_cpu / claimed,
        worker_cpu_share=worker_cpu / ((end - start) * cpus),
        soaks_per_worker_core=int(TICK_S * claimed / max(worker_cpu, 1e-9)),
        load=f"{load_start:.1f} / {load_end:.1f}",
        date=datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    return result


def _sshd_cpu_after_close(sshd_pid: int, deadline_s: float = 15.0) -> float:
    """The sshd's CPU once the workers' connections are gone (their processes reaped into it)."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        try:
            if not psutil.Process(sshd_pid).children():
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    return _tree_cpu(sshd_pid)


def _read_records(folder: Path) -> list[dict]:
    found = []
    for path in folder.glob("*.jsonl"):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return found
