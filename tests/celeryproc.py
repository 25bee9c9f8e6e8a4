"""Real Celery worker and beat processes for tests, pointed at this test session's database
and broker. Killing them is how the fault tests simulate crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import redis
from django.conf import settings
from django.db import connection

from config.queues import ALL_QUEUES_OPTION

ROOT = Path(__file__).resolve().parents[1]
# Short budgets so runs change hands and recover within seconds instead of minutes.
FAST_RECOVERY = {
    "TOLLGATE_TASK_BUDGET_S": "3",
    "TOLLGATE_DRIVER_CLAIM_S": "6",
    "TOLLGATE_REDISPATCH_AFTER_S": "3",
    "TOLLGATE_BEAT_EVERY_S": "2",
    # Due again at once: a compressed soak ticks at every beat sweep (2 s), as it did when the
    # beat's duplicate messages were not yet dropped.
    "TOLLGATE_SOAK_TICK_S": "0",
    "TOLLGATE_SOAK_TICK_CLAIM_S": "8",
    "TOLLGATE_SOAK_POKE_S": "10",
    "TOLLGATE_SOAK_PROVISIONAL_S": "2",
}


def process_environment(**extra: str) -> dict[str, str]:
    """This session's environment, with the test database the tests themselves use."""
    database = connection.settings_dict
    env = dict(os.environ)
    env.update(FAST_RECOVERY)
    env["DATABASE_URL"] = (
        f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    )
    env.update(extra)
    return env


def purge_broker() -> None:
    """Drop messages a previous session left in this session's broker database."""
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


class CeleryProcess:
    def __init__(self, role: str, workdir: Path, name: str, env: dict | None = None) -> None:
        self.env = env or {}
        self.role = role
        self.workdir = workdir
        self.name = name
        self.process: subprocess.Popen | None = None

    def start(self) -> CeleryProcess:
        command = [sys.executable, "-m", "celery", "-A", "config", self.role, "--loglevel", "INFO"]
        if self.role == "worker":
            command += [
                "--concurrency",
                "1",
                "--hostname",
                f"{self.name}@%h",
                "--without-gossip",
                "--without-mingle",
                # Every queue: one test worker does every kind of work, or a task would hang.
                "--queues",
                ALL_QUEUES_OPTION,
            ]
        else:
            command += ["--schedule", str(self.workdir / f"{self.name}-schedule")]
        self.log_path = self.workdir / f"{self.name}.log"
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=process_environment(**self.env),
            start_new_session=True,
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group: the main process and its pool children."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def children(self) -> list[psutil.Process]:
        if not self.process:
            return []
        return psutil.Process(self.process.pid).children(recursive=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_or_show(condition, timeout: float, *processes: CeleryProcess):
    """wait_for, but a timeout shows the tail of each process's log."""
    from tests.sshd import wait_for

    try:
        return wait_for(condition, timeout=timeout)
    except AssertionError as missed:
        logs = "\n".join(f"--- {p.name}\n{p.log()[-4000:]}" for p in processes)
        raise AssertionError(f"{missed}\n{logs}") from None
