"""A G3 run driven by real Celery workers and beat: killing a worker mid-run, cancelling.

The run's rows must be committed for the worker processes to see them (transactional_db).
"""

from __future__ import annotations

import time

import pytest

from gates import services
from gates.models import Host, Measurement, Run
from tests.celeryproc import CeleryProcess, purge_broker, wait_or_show
from tests.runners.program.test_gate_programs import host_processes_gone, pass_gate, start
from tests.simhosts import g3_spec, ssh_simhost
from tests.sshd import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def celery(tmp_path):
    """Start worker/beat processes on demand; every one is stopped at the end."""
    purge_broker()
    started: list[CeleryProcess] = []

    def launch(role: str, name: str) -> CeleryProcess:
        process = CeleryProcess(role, tmp_path, name).start()
        started.append(process)
        return process

    yield launch
    for process in started:
        process.stop()


@pytest.fixture
def sim_host(customer_org, own_sshd, tmp_path) -> Host:
    return ssh_simhost(customer_org, own_sshd, tmp_path / "host")


def test_a_worker_killed_mid_g3_loses_nothing_and_duplicates_nothing(
    celery, actor, vendor_viewer, engagement, sim_host
):
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
    celery("beat", "beat")
    first = celery("worker", "w1")
    run = start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec())
    wait_or_show(lambda: Measurement.objects.filter(run=run).count() >= 2, 120, first)
    first.kill()
    done_at_kill = Measurement.objects.filter(run=run).count()
    second = celery("worker", "w2")
    wait_or_show(lambda: Run.objects.get(pk=run.pk).is_ended, 240, second)
    run.refresh_from_db()
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    cells = list(Measurement.objects.filter(run=run).values_list("arm", "tier", "repetition"))
    assert len(cells) == len(set(cells)) > done_at_kill
    assert run.decisions.count() == 1
    assert wait_for(lambda: host_processes_gone(run), timeout=15)


def test_cancel_through_a_worker_ends_the_run_within_ten_seconds(
    celery, actor, vendor_viewer, engagement, sim_host
):
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
    celery("beat", "beat")
    worker = celery("worker", "w1")
    run = start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec())
    wait_or_show(
        lambda: run.steps.filter(state="started", name__contains="c=").exists(), 120, worker
    )
    asked = time.monotonic()
    services.run_cancel(
        actor=actor, viewer=vendor_viewer, run=run, reason="the test stops this run"
    )
    wait_or_show(lambda: Run.objects.get(pk=run.pk).state == "canceled", 10, worker)
    assert time.monotonic() - asked < 10
    assert wait_for(lambda: host_processes_gone(run), timeout=10)
    assert Host.objects.get(pk=sim_host.pk).lease_run is None
