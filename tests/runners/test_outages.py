"""Runs that meet what real networks do, over a real sshd serving simhost: an outage shorter
than the retry window is ridden out and the run resumes where it was; a longer one ends the
run as infra_error and leaves a pending cleanup that the janitor finishes once sshd is back
(the host cannot be leased until then); a foreign process on the server's port is named.

Tasks run in this process one after another, as in test_gate_programs.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gates import services
from gates.models import Host, Measurement, Run, RunStep
from gates.services import pokes
from runners.transport import LocalTransport
from tests.runners.program.test_gate_programs import drive, host_processes_gone, pass_gate, start
from tests.simhosts import g1_spec, g2_spec, g3_spec, ssh_simhost
from tests.sshd import wait_for
from worker import tasks

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
OUTAGE_S = 4.0

# Listens on the port given and waits: someone's stray server, not launched by any run.
FOREIGN_LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture(autouse=True)
def tasks_run_here(monkeypatch, settings):
    """The test is the worker (and the beat): hand-overs and retries are its next call."""
    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    settings.TOLLGATE_TASK_BUDGET_S = 3


def sim_host(customer_org, server, tmp_path: Path, **parameters) -> Host:
    host = ssh_simhost(customer_org, server, tmp_path / "host")
    host.parameters = {**host.parameters, **parameters}
    host.save(update_fields=["parameters"])
    return host


def restart_sshd(server, host: Host) -> None:
    server.start()
    Host.objects.filter(pk=host.pk).update(port=server.port)  # start() may pick a new port


def try_once(run: Run) -> Run:
    """One task's worth of driving; returns the run as it is now. While the next try after an
    outage is not due the task leaves the run alone, as a poke from the redispatcher would."""
    tasks.advance_run(run.pk)
    run.refresh_from_db()
    return run


def backoff_of(run: Run) -> float:
    """Seconds from the failed try to the next one the run allows."""
    return round((run.outage_retry_at - run.heartbeat_at).total_seconds(), 1)


def resume(run: Run) -> Run:
    """Once the host is back: wait out the due time, then drive to the end."""
    wait_for(lambda: try_once(run).outage_since is None or run.is_ended, timeout=30)
    return drive(run)


def drive_to(run: Run, settings, until) -> Run:
    """Drive one host poll per task until `until` holds, then back to the fixture's budget. With
    a budget of seconds a task can launch a bench and see it finish, so the test could never
    find one running and would drive the run to its end (as CI once did)."""
    budget, settings.TOLLGATE_TASK_BUDGET_S = settings.TOLLGATE_TASK_BUDGET_S, 0
    try:
        run = drive(run, until=until)
    finally:
        settings.TOLLGATE_TASK_BUDGET_S = budget
    assert not run.is_ended, (run.outcome, run.reason)
    return run


def bench_running(run: Run) -> bool:
    return RunStep.objects.filter(
        run=run, state="started", name__contains="c=", detail__progress__launched=True
    ).exists()


def serve_dirs(run: Run) -> list[str]:
    return [path for path in services.run_remote_dirs(run) if "/serve-" in path]


def run_dir_of(run: Run) -> Path:
    return Path(services.run_execution(run).run_dir)


def test_g3_rides_out_an_sshd_outage_and_resumes_where_it_was(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path, settings
):
    host = sim_host(customer_org, own_sshd, tmp_path, transport_retry_window_s=60)
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    run = start(actor, vendor_viewer, engagement, "G3", host, g3_spec(repetitions=(4, 4)))
    drive_to(
        run, settings, lambda r: Measurement.objects.filter(run=r).exists() and bench_running(r)
    )
    done_before = dict(run.steps.filter(state="done").values_list("name", "finished_at"))

    own_sshd.stop()
    went_down = time.monotonic()
    backoffs = []

    def outage_lasted() -> bool:
        tried = try_once(run)
        if tried.outage_retries > len(backoffs):
            backoffs.append(backoff_of(tried))
        return tried.outage_retries >= 2 and time.monotonic() - went_down >= OUTAGE_S

    wait_for(outage_lasted, timeout=60)
    assert run.state == "running" and run.outage_since is not None, run.reason
    assert "host unreachable, retrying" in run.log
    assert backoffs[:2] == [1.0, 2.0]  # backing off, not hammering the host
    restart_sshd(own_sshd, host)
    run = resume(run)

    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    assert run.outage_since is None and "host reachable again" in run.log
    benches = [s.detail["step"] for s in run.steps.all() if s.detail["step"]["kind"] == "bench"]
    planned = sorted((s["arm"], s["tier"], s["repetition"]) for s in benches)
    measured = sorted(Measurement.objects.filter(run=run).values_list("arm", "tier", "repetition"))
    assert measured == planned and len(planned) == 12  # one measurement per cell, none lost
    # Steps done before the outage were not done again: each kept its first finish.
    assert dict(run.steps.filter(name__in=done_before).values_list("name", "finished_at")) == (
        done_before
    )
    assert host_processes_gone(run) and not run_dir_of(run).exists()
    assert services.host_cleanup_pending(host.pk) is None


def test_an_outage_past_the_window_ends_infra_error_and_the_janitor_reaps_the_orphan(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path, settings
):
    host = sim_host(customer_org, own_sshd, tmp_path, transport_retry_window_s=3)
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    gate = engagement.gates.get(kind="G3")
    run = start(actor, vendor_viewer, engagement, "G3", host, g3_spec())
    drive_to(run, settings, bench_running)
    local = LocalTransport()
    (server_dir,) = [path for path in serve_dirs(run) if local.status(path).running]

    own_sshd.stop()
    run = wait_for(lambda: (r := try_once(run)).is_ended and r, timeout=60)
    assert (run.state, run.outcome) == ("finished", "infra_error")
    assert "did not answer for" in run.reason and "retry window 3 s" in run.reason
    assert local.status(server_dir).group_alive  # the orphan: nobody could reach it
    pending = services.host_cleanup_pending(host.pk)
    assert pending is not None and pending.run_id == run.pk

    with pytest.raises(services.HostCleanupPendingError) as refused:
        services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    assert refused.value.field == "host" and f"from run {run.pk}" in refused.value.detail
    assert Run.objects.filter(gate=gate).count() == 1

    tasks.clean_hosts()  # sshd still down: the cleanup waits
    pending.refresh_from_db()
    assert (pending.attempts, pending.done_at) == (1, None) and pending.last_problem
    assert local.status(server_dir).group_alive

    restart_sshd(own_sshd, host)
    tasks.clean_hosts()
    pending.refresh_from_db()
    assert pending.done_at is not None, pending.last_problem
    assert wait_for(lambda: not local.status(server_dir).group_alive, timeout=15)
    assert not run_dir_of(run).exists()
    tasks.clean_hosts()  # safe twice: nothing left to claim
    assert Host.objects.get(pk=host.pk).cleanups.get().attempts == 2
    again = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    assert again.lease_token is not None  # leasable again, only now


def test_a_foreign_process_on_the_server_port_is_infra_error_naming_it(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = sim_host(customer_org, own_sshd, tmp_path)
    foreign = subprocess.Popen(
        [sys.executable, "-c", FOREIGN_LISTENER, str(host.parameters["port"])],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert foreign.stdout.readline().strip() == "ready"
        pass_gate(actor, vendor_viewer, engagement, "G1", host)
        run = drive(start(actor, vendor_viewer, engagement, "G2", host, g2_spec()))
        assert (run.state, run.outcome) == ("finished", "infra_error"), run.reason
        assert f"pid {foreign.pid}" in run.reason and "already in use" in run.reason
        assert not Measurement.objects.filter(run=run).exists()
        assert not run.steps.filter(detail__progress__launched=True).exists()  # nothing started
        assert foreign.poll() is None  # a stranger's process is named, never killed
        assert services.host_cleanup_pending(host.pk) is None
    finally:
        foreign.kill()
        foreign.wait(timeout=10)


def test_authentication_failing_for_a_while_is_ridden_out(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = sim_host(customer_org, own_sshd, tmp_path, transport_retry_window_s=60)
    run = start(actor, vendor_viewer, engagement, "G1", host, g1_spec())
    authorized = own_sshd.workdir / "authorized_keys"
    keys = authorized.read_text()
    authorized.write_text("")  # the account backend refuses the key for now
    run = try_once(run)
    assert run.state == "running" and run.outage_retries == 1, run.reason
    assert "authentication refused" in run.log
    authorized.write_text(keys)
    run = resume(run)
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason


def test_a_changed_host_key_fails_at_once_and_blocks_the_host_until_it_is_pinned_again(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = sim_host(customer_org, own_sshd, tmp_path, transport_retry_window_s=600)
    run = start(actor, vendor_viewer, engagement, "G1", host, g1_spec())
    new_key = own_sshd.regenerate_host_key()
    Host.objects.filter(pk=host.pk).update(port=own_sshd.port)
    run = try_once(run)
    assert (run.state, run.outcome, run.outage_retries) == ("finished", "infra_error", 0)
    assert "host key changed" in run.reason
    tasks.clean_hosts()  # the janitor never trusts the new key by itself
    assert services.host_cleanup_pending(host.pk) is not None
    Host.objects.filter(pk=host.pk).update(
        host_key=new_key, host_key_fingerprint=services.host_key_fingerprint(new_key)
    )
    tasks.clean_hosts()
    assert services.host_cleanup_pending(host.pk) is None
