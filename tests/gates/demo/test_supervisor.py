"""The demo's supervisor (issue 27): a dead worker or beat is started again, said and recorded
(/healthz "restarts", for the pages' banner); a dead web server ends the demo."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gates import services
from gates.demo.supervisor import ServiceExited, Supervised, restart_dead
from tests.sshd import wait_for

pytestmark = pytest.mark.django_db

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def children():
    started: list[Supervised] = []

    def child(name: str) -> Supervised:
        supervised = Supervised(name, SLEEPER, cwd=Path.cwd(), env=dict(os.environ)).start()
        started.append(supervised)
        return supervised

    yield child
    for supervised in started:
        if supervised.process is not None and supervised.exit_code is None:
            supervised.process.kill()
            supervised.process.wait(timeout=10)


def _kill(supervised: Supervised) -> int:
    assert supervised.process is not None
    pid = supervised.process.pid
    supervised.process.kill()
    wait_for(lambda: supervised.exit_code is not None)
    return pid


def test_a_dead_worker_is_started_again_said_and_shown_by_healthz(children, client):
    worker, beat = children("worker"), children("beat")
    said: list[str] = []
    assert restart_dead([worker, beat], said.append) == []  # all alive: nothing to do
    old_pid = _kill(worker)
    assert restart_dead([worker, beat], said.append) == ["worker"]
    assert worker.exit_code is None and worker.process is not None
    assert worker.process.pid != old_pid and worker.restarts == 1
    assert said == ["The demo's worker exited (code -9); starting it again."]
    assert set(services.service_restarts()) == {"worker"}
    assert "worker" in client.get("/healthz").json()["restarts"]


def test_a_dead_web_server_ends_the_demo(children):
    web = children("web")
    _kill(web)
    with pytest.raises(ServiceExited, match="web exited"):
        restart_dead([web], print)
    assert services.service_restarts() == {}
