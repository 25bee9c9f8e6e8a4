"""A COMPRESSED G4 soak (30 s, 1 s windows) driven by real Celery worker and beat processes
through real faults, one after another in the same soak: a worker SIGKILLed mid-soak and a new
one started, the SSH link cut (sshd stopped) for several windows, and the broker (a Redis of
this test's own) restarted. The agent keeps recording throughout; every seq is stored once,
nothing is lost and no gap is invented for time the agent recorded.

A second soak rides out a PostgreSQL restart: the test, the worker and the beat all use a
PostgreSQL server of the test's own (tests/pgown.py), never the shared one.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connections

from gates.models import Run, Soak, SoakSample
from tests.celeryproc import CeleryProcess, wait_or_show
from tests.pgown import OwnPostgres, postgres_bin
from tests.runners.program.test_gate_programs import pass_gate, start
from tests.runners.soak.test_soak import LOOSE_DRIFT, assert_every_seq_once, g4_spec, soak_host
from tests.sshd import free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class OwnRedis:
    """A redis-server of this test alone, so restarting it disturbs nobody else."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        command += ["--dir", str(self.workdir)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        ping = ["redis-cli", "-p", str(self.port), "ping"]
        wait_for(lambda: subprocess.run(ping, capture_output=True).stdout.strip() == b"PONG")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def redis_own(tmp_path):
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def celery(tmp_path, redis_own):
    started: list[CeleryProcess] = []

    def launch(role: str, name: str) -> CeleryProcess:
        env = {"CELERY_BROKER_URL": redis_own.url, "TOLLGATE_SOAK_UNREACHABLE_S": "60"}
        process = CeleryProcess(role, tmp_path, name, env=env).start()
        started.append(process)
        return process

    yield launch
    for process in started:
        process.stop()


def stored(run: Run) -> int:
    return SoakSample.objects.filter(run=run).count()


def test_a_soak_survives_a_killed_worker_an_ssh_cut_and_a_broker_restart(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path, celery, redis_own
):
    host = soak_host(customer_org, own_sshd, tmp_path)
    # Kept for inspection (the host's keep_run_dir): the lines on the host are compared below.
    host.parameters = {**host.parameters, "keep_run_dir": True}
    host.save(update_fields=["parameters"])
    for kind in ("G1", "G2", "G3"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    beat = celery("beat", "beat")
    first = celery("worker", "w1")
    # The start's poke goes to the session's broker; the beat's re-dispatch finds the run.
    run = start(actor, vendor_viewer, engagement, "G4", host, g4_spec(seconds=30, **LOOSE_DRIFT))
    wait_or_show(lambda: stored(run) >= 3, 90, first, beat)

    first.kill()
    second = celery("worker", "w2")
    wait_or_show(lambda: stored(run) >= 8, 60, second, beat)

    own_sshd.stop()
    time.sleep(1.5)  # a tick that read just before the cut records it
    cut_at = stored(run)
    time.sleep(4)  # several windows pass while nobody can reach the host
    assert stored(run) == cut_at
    own_sshd.start()
    wait_or_show(lambda: stored(run) >= cut_at + 6, 60, second, beat)

    redis_own.stop()
    redis_own.start()
    wait_or_show(lambda: Run.objects.get(pk=run.pk).is_ended, 90, second, beat)

    run.refresh_from_db()
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    decision = run.decisions.get()
    assert decision.verdict == "pass", decision.result["reasons"]
    assert decision.result["soak"]["gaps"] == []
    soak = Soak.objects.get(run=run)
    assert soak.generation == 1  # the agent itself never stopped
    seqs = assert_every_seq_once(run)
    lines = (Path(soak.run_dir) / "soak-data" / "windows.jsonl").read_text().splitlines()
    assert len(lines) == len(seqs)


@pytest.fixture
def own_postgres():
    """This test's own PostgreSQL, made the default database of the test before any of its
    objects are (list it first), and so of the worker and beat it starts; then put back."""
    if postgres_bin() is None:
        pytest.skip("no PostgreSQL server binaries to start one of the test's own")
    server = OwnPostgres().start()
    server.create_database("tollgate_own")
    default = connections["default"]
    saved = dict(default.settings_dict)
    default.close()
    default.settings_dict.update(HOST="127.0.0.1", PORT=str(server.port), NAME="tollgate_own")
    try:
        call_command("migrate", verbosity=0)
        yield server
    finally:
        default.close()
        default.settings_dict.clear()
        default.settings_dict.update(saved)
        server.remove()


def stored_or_none(run: Run) -> int | None:
    """Stored windows, or None while the database is restarting (the next call reconnects)."""
    try:
        return stored(run)
    except DatabaseError:
        connections["default"].close()
        return None


def test_a_soak_rides_out_a_postgresql_restart_with_every_window_stored_once(
    own_postgres, actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path, celery
):
    host = soak_host(customer_org, own_sshd, tmp_path)
    host.parameters = {**host.parameters, "keep_run_dir": True}  # lines compared below
    host.save(update_fields=["parameters"])
    for kind in ("G1", "G2", "G3"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    beat, worker = celery("beat", "beat"), celery("worker", "w1")
    run = start(actor, vendor_viewer, engagement, "G4", host, g4_spec(seconds=30, **LOOSE_DRIFT))
    wait_or_show(lambda: (stored_or_none(run) or 0) >= 3, 90, worker, beat)

    connections["default"].close()
    own_postgres.stop()
    time.sleep(4)  # several windows pass with nowhere to store them; ticks fail meanwhile
    own_postgres.start()
    before = stored_or_none(run) or 0
    wait_or_show(lambda: (stored_or_none(run) or 0) > before, 60, worker, beat)
    ended = lambda: Run.objects.get(pk=run.pk).is_ended  # noqa: E731
    wait_or_show(ended, 90, worker, beat)

    run.refresh_from_db()
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    decision = run.decisions.get()
    assert decision.verdict == "pass", decision.result["reasons"]  # as without the restart
    assert decision.result["soak"]["gaps"] == []  # the agent recorded throughout
    soak = Soak.objects.get(run=run)
    seqs = assert_every_seq_once(run)
    lines = (Path(soak.run_dir) / "soak-data" / "windows.jsonl").read_text().splitlines()
    assert len(lines) == len(seqs)
    assert "OperationalError" in worker.log() or "OperationalError" in beat.log()
