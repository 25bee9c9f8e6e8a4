"""Pending host cleanups: claimed by id, safe twice, blocking the host's lease until the janitor
has stopped every process of the run (found by launch token) and removed its directory. On a
local host with real detached processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates import services
from gates.models import HostCleanup, Run
from runners.cleanup import MARKER, HostLeftovers
from runners.transport import LocalTransport
from tests.simhosts import local_simhost
from tests.sshd import wait_for
from worker import tasks

pytestmark = pytest.mark.django_db
TOKEN = "run-0123abcd"


@pytest.fixture
def host(customer_org, tmp_path):
    return local_simhost(customer_org, tmp_path / "host")


@pytest.fixture
def ended_run(actor, vendor_viewer, engagement, host) -> Run:
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    return run


@pytest.fixture
def run_dir(tmp_path) -> Path:
    path = tmp_path / "host" / "runs" / "run-1-0123abcd"
    path.mkdir(parents=True)
    (path / MARKER).write_text(TOKEN + "\n")
    yield path
    for launched in path.parent.glob("*/*"):
        LocalTransport().kill(str(launched), grace=1)


def launch(run_dir: Path, name: str, token: str) -> str:
    path = str(run_dir / name)
    LocalTransport().launch_detached(path, token, ["sleep", "120"])
    return path


def pending(run: Run, run_dir: Path, **options) -> HostCleanup:
    leftovers = HostLeftovers(run_dir=str(run_dir), token=TOKEN, **options)
    cleanup = services.host_cleanup_record(run=run, leftovers=leftovers, problem="unreachable")
    services.run_fail(run_id=run.pk, outcome="infra_error", reason="host unreachable")
    return cleanup


def test_a_pending_cleanup_is_claimed_by_one_janitor_at_a_time(ended_run, run_dir):
    cleanup = pending(ended_run, run_dir)
    job = services.host_cleanup_claim(cleanup_id=cleanup.pk)
    assert job is not None and job.leftovers.run_dir == str(run_dir)
    assert services.host_cleanup_claim(cleanup_id=cleanup.pk) is None
    assert services.host_cleanups_due() == []
    assert services.host_cleanup_finish(job=job, problems=["still unreachable"]) is False
    assert services.host_cleanups_due() == [cleanup.pk]  # released for the next beat
    again = services.host_cleanup_claim(cleanup_id=cleanup.pk)
    assert services.host_cleanup_finish(job=again, problems=[]) is True
    assert services.host_cleanup_finish(job=again, problems=[]) is False  # done once
    assert services.host_cleanup_finish(job=job, problems=["late"]) is False  # stale claim
    cleanup.refresh_from_db()
    assert (cleanup.attempts, cleanup.last_problem) == (2, "") and cleanup.done_at


def test_a_host_with_a_pending_cleanup_cannot_be_leased(
    actor, vendor_viewer, engagement, ended_run, run_dir, host
):
    cleanup = pending(ended_run, run_dir)
    gate = engagement.gates.get(kind="G1")
    with pytest.raises(services.HostCleanupPendingError) as refused:
        services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    assert (refused.value.status, refused.value.code) == (409, "host_cleanup_pending")
    assert refused.value.field == "host" and f"run {ended_run.pk}" in refused.value.detail
    assert Run.objects.count() == 1
    job = services.host_cleanup_claim(cleanup_id=cleanup.pk)
    services.host_cleanup_finish(job=job, problems=[])
    assert services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)


def test_the_janitor_stops_the_runs_processes_found_by_token_and_removes_its_directory(
    ended_run, run_dir
):
    known = launch(run_dir, "serve-a", f"{TOKEN}-serve-a")
    lost = launch(run_dir, "bench-b", f"{TOKEN}-bench-b")  # its launch answer never arrived
    stranger = launch(run_dir.parent / "run-2-ffff", "serve-a", "run-ffff-serve-a")
    pending(ended_run, run_dir, launched_dirs=(known,))
    local = LocalTransport()

    tasks.clean_hosts()
    assert wait_for(lambda: not any(local.status(p).group_alive for p in (known, lost)), 15)
    assert not run_dir.exists()
    assert local.status(stranger).running  # another run's process: not ours to touch
    cleanup = HostCleanup.objects.get()
    assert cleanup.done_at is not None and cleanup.attempts == 1
    tasks.clean_hosts()  # safe twice
    assert HostCleanup.objects.get().attempts == 1


def test_a_kept_run_directory_stays_for_inspection_with_its_processes_stopped(ended_run, run_dir):
    server = launch(run_dir, "serve-a", f"{TOKEN}-serve-a")
    pending(ended_run, run_dir, keep_run_dir=True)
    tasks.clean_hosts()
    assert not LocalTransport().status(server).group_alive
    assert (run_dir / "serve-a" / "stdout.log").exists()


def test_a_directory_without_the_runs_marker_is_never_removed(ended_run, run_dir):
    (run_dir / MARKER).write_text("run-someone-else\n")
    pending(ended_run, run_dir)
    tasks.clean_hosts()
    assert run_dir.exists() and HostCleanup.objects.get().done_at is not None


def test_the_least_tried_cleanup_comes_first_and_a_beat_stops_at_its_budget(
    actor, vendor_viewer, engagement, customer_org, ended_run, run_dir, tmp_path, settings
):
    chronic = pending(ended_run, run_dir)
    HostCleanup.objects.filter(pk=chronic.pk).update(attempts=40)  # a host away for days
    other_host = local_simhost(customer_org, tmp_path / "other", name="sim-other")
    gate = engagement.gates.get(kind="G1")
    fresh_run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=other_host)
    fresh = pending(fresh_run, run_dir.parent / "run-2-0123abcd")
    assert services.host_cleanups_due() == [fresh.pk, chronic.pk]
    settings.TOLLGATE_TASK_BUDGET_S = -1  # already spent: the beat leaves everything for later
    tasks.clean_hosts()
    attempts = HostCleanup.objects.order_by("pk").values_list("attempts", flat=True)
    assert list(attempts) == [40, 0]  # nothing was tried
