"""The embedded broker under concurrent writers (issue 27): several producer processes send
many tasks through the file-system transport to two real Celery workers at once; every task
arrives exactly once, and no worker dies of a half-written message (the stock transport's
JSONDecodeError)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sshd import wait_for

ROOT = Path(__file__).resolve().parents[2]
PRODUCERS = 4
TASKS_EACH = 150
pytestmark = [pytest.mark.fault, pytest.mark.slow]


def _env(folder: Path) -> dict[str, str]:
    return {**os.environ, "STRESS_BROKER_DIR": str(folder), "PYTHONPATH": str(ROOT)}


def _worker(folder: Path, name: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "celery", "-A", "tests.faults.stressapp", "worker"]
    command += ["--concurrency", "2", "--hostname", f"{name}@%h", "--loglevel", "INFO"]
    # Gossip, mingle and heartbeats on: they bind and read the fanout exchange tables, the
    # files the stock transport rewrote in place while others read them.
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=_env(folder),
        start_new_session=True,
        stdout=(folder / f"{name}.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def _arrived(folder: Path) -> list[int]:
    results = folder / "results.txt"
    return [int(line) for line in results.read_text().split()] if results.exists() else []


def test_many_tasks_from_several_producers_arrive_exactly_once(tmp_path):
    for sub in ("queue", "processed", "control"):
        (tmp_path / sub).mkdir()
    workers = [_worker(tmp_path, f"stress{n}") for n in range(2)]
    try:
        producers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.faults.stressapp",
                    str(n * TASKS_EACH),
                    str(TASKS_EACH),
                ],
                cwd=ROOT,
                env=_env(tmp_path),
            )
            for n in range(PRODUCERS)
        ]
        for producer in producers:
            assert producer.wait(timeout=120) == 0
        sent = PRODUCERS * TASKS_EACH
        wait_for(lambda: len(_arrived(tmp_path)) >= sent, timeout=120)
        arrived = _arrived(tmp_path)
        assert sorted(arrived) == list(range(sent))  # each once: none lost, none twice
        assert all(worker.poll() is None for worker in workers)  # no worker died
        logs = "".join((tmp_path / f"stress{n}.log").read_text() for n in range(2))
        assert "JSONDecodeError" not in logs and "Unrecoverable" not in logs
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)
