"""RunSession: the claims, step delivery counting, idempotent recording, fencing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.utils import timezone

from gates import services
from gates.errors import LeaseLostError
from gates.models import Artifact, Host, Measurement, Run
from gates.services.runs import evaluation, recording
from runners.program import sequence
from runners.program.perform import Artifact as StepArtifact
from runners.program.perform import StepProgress
from tests.gates.services.test_uploads import pass_gate
from tests.simhosts import g2_spec, local_simhost

pytestmark = pytest.mark.django_db

BENCH = {"name": "g3 offload c=8 r1", "kind": "bench", "arm": "offload", "tier": 8, "repetition": 1}
RESULT = {"completed": 8, "failed": 0, "ttft_ms": {"median": 10.0}}


@pytest.fixture
def queued(actor, vendor_viewer, engagement, customer_org, tmp_path) -> Run:
    host = local_simhost(customer_org, tmp_path)
    return services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )


@pytest.fixture
def running(queued) -> Run:
    return services.run_claim(run_id=queued.pk)


@pytest.fixture
def session(running):
    session = services.RunSession.claim(running.pk)
    session.append_steps(
        [dict(BENCH), {"name": "probe kernel", "kind": "probe", "probe": "kernel"}]
    )
    return session


def finished_bench() -> StepProgress:
    content = b'{"completed": 8}'
    return StepProgress(
        True,
        {"completed": 8},
        [StepArtifact("bench/result.json", "vllm-bench", content)],
        measurement={
            "arm": "offload",
            "tier": 8,
            "repetition": 1,
            "metrics": RESULT,
            "server": {"prefix_caching": True},
            "artifact": "bench/result.json",
        },
        log="done\n",
    )


def test_a_second_task_cannot_claim_a_run_being_driven(session):
    assert services.RunSession.claim(session.run.pk) is None


def test_a_released_run_can_be_claimed_again(session):
    session.release()
    assert services.RunSession.claim(session.run.pk) is not None


def test_an_expired_claim_frees_the_run(session):
    Run.objects.filter(pk=session.run.pk).update(driver_until=timezone.now())
    assert services.RunSession.claim(session.run.pk) is not None


def test_a_dispatched_task_starts_a_queued_run_and_drives_it_in_one_claim(queued):
    session = services.RunSession.claim_dispatched(queued.pk)
    run = Run.objects.get(pk=queued.pk)
    assert run.state == Run.State.RUNNING and run.started_at and run.last_dispatched_at
    assert run.driver_token == session.token and run.driver_until > timezone.now()


def test_a_second_dispatched_task_leaves_a_driven_run_but_counts_as_a_poke(queued):
    services.RunSession.claim_dispatched(queued.pk)
    started = Run.objects.get(pk=queued.pk).started_at
    Run.objects.filter(pk=queued.pk).update(last_dispatched_at=None)
    assert services.RunSession.claim_dispatched(queued.pk) is None
    run = Run.objects.get(pk=queued.pk)
    assert run.last_dispatched_at and run.started_at == started


def test_the_task_after_a_handover_keeps_the_run_s_start_time(queued):
    services.RunSession.claim_dispatched(queued.pk).release()
    started = Run.objects.get(pk=queued.pk).started_at
    assert services.RunSession.claim_dispatched(queued.pk) is not None
    assert Run.objects.get(pk=queued.pk).started_at == started


def test_a_dispatched_task_never_drives_an_ended_run(queued, actor, vendor_viewer):
    services.run_cancel(
        actor=actor, viewer=vendor_viewer, run=queued, reason="the test stops this run"
    )
    assert services.RunSession.claim_dispatched(queued.pk) is None
    run = Run.objects.get(pk=queued.pk)
    assert run.state == Run.State.CANCELED and not run.driver_token


def test_a_dispatched_task_never_drives_an_upload_run(actor, vendor_viewer, engagement):
    run = services.run_create(
        actor=actor,
        viewer=vendor_viewer,
        gate=engagement.gates.get(kind="G1"),
        host=None,
        source=Run.Source.UPLOAD,
    )
    assert services.RunSession.claim_dispatched(run.pk) is None
    assert not Run.objects.get(pk=run.pk).driver_token


@pytest.mark.django_db(transaction=True)
def test_two_tasks_dispatched_at_once_get_one_session_between_them(queued):
    tasks = 8
    start = threading.Barrier(tasks)

    def task() -> bool:
        try:
            start.wait()
            return services.RunSession.claim_dispatched(queued.pk) is not None
        finally:
            connection.close()

    with ThreadPoolExecutor(tasks) as pool:
        sessions = list(pool.map(lambda _: task(), range(tasks)))
    assert sessions.count(True) == 1


def test_recording_a_step_twice_stores_one_artifact_and_one_measurement(session):
    step, _ = session.next_step()
    session.record(step, finished_bench())
    session.record(step, finished_bench())
    assert Artifact.objects.filter(run=session.run).count() == 1
    measurement = Measurement.objects.get(run=session.run)
    assert measurement.artifact.sha256 and measurement.metrics == RESULT
    run = Run.objects.get(pk=session.run.pk)
    assert (run.progress_done, run.progress_total) == (1, 2)
    assert run.log.count("done") == 2


def test_a_step_that_keeps_killing_its_task_is_poison(running):
    for _ in range(recording.MAX_STEP_DELIVERIES):
        session = services.RunSession.claim(running.pk)
        if not session.has_plan():
            session.append_steps([dict(BENCH)])
        session.next_step()
        Run.objects.filter(pk=running.pk).update(driver_until=None)  # the task "died"
    session = services.RunSession.claim(running.pk)
    with pytest.raises(services.PoisonStepError):
        session.next_step()


def test_a_clean_handover_does_not_count_as_a_failed_delivery(running):
    for _ in range(recording.MAX_STEP_DELIVERIES + 2):
        session = services.RunSession.claim(running.pk)
        if not session.has_plan():
            session.append_steps([dict(BENCH)])
        session.next_step()
        session.release()
    assert running.steps.get().deliveries == 0


def test_a_task_whose_claim_was_taken_over_cannot_write(session):
    step, _ = session.next_step()
    Run.objects.filter(pk=session.run.pk).update(driver_token="someone-else")
    with pytest.raises(services.ClaimLostError):
        session.record(step, finished_bench())
    assert not Measurement.objects.exists()


def test_a_run_that_lost_its_host_lease_cannot_write(session):
    step, _ = session.next_step()
    Host.objects.filter(pk=session.run.host_id).update(fencing_token=99)
    with pytest.raises(LeaseLostError):
        session.record(step, finished_bench())
    assert not Measurement.objects.exists()


def test_g1_evaluation_merges_the_facts_of_every_probe_and_records_the_decision(session):
    facts = {"kernel": "6.1.0", "host_memory_bytes": 2048 * 2**30}
    for step in (BENCH, {"name": "probe kernel"}):
        session.record(step, StepProgress(True, facts=facts))
    evaluation = session.evaluate()
    assert evaluation.decided and evaluation.verdict in ("fail", "inconclusive")
    decision = session.run.gate.decisions.get()
    assert decision.result["inputs"]["facts"]["host_memory_bytes"] == 2048 * 2**30
    assert Run.objects.get(pk=session.run.pk).outcome == "completed"


def test_every_step_that_launched_a_process_is_stopped_whatever_its_kind(session):
    """run_remote_dirs keeps no list of kinds: a step that launched something says where."""
    session.append_steps([{"name": "soak window 1", "kind": "soak"}])
    launched = {"g3 offload c=8 r1": "/h/bench-1", "soak window 1": "/h/soak-1"}
    while (current := session.next_step()) is not None:
        step, _ = current
        run_dir = launched.get(step["name"])
        session.record(step, StepProgress(True, {"run_dir": run_dir} if run_dir else {}))
    assert services.run_remote_dirs(session.run) == ["/h/bench-1", "/h/soak-1"]


def test_g2_evaluation_reads_every_cell_the_g2_program_measures(
    actor, vendor_viewer, engagement, customer_org, host, tmp_path
):
    """The arm names come from the plan; a renamed arm would leave G2 without pairs or hits."""
    pass_gate(actor, vendor_viewer, engagement, "G1", host)
    gate = engagement.gates.get(kind="G2")
    services.gate_spec_update(actor=actor, gate=gate, document=g2_spec())
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=gate, host=local_simhost(customer_org, tmp_path)
    )
    services.run_claim(run_id=run.pk)
    session = services.RunSession.claim(run.pk)
    session.append_steps(sequence.plan_run(session.spec, []))
    while (current := session.next_step()) is not None:
        step, _ = current
        cell = {key: step[key] for key in ("arm", "tier", "repetition")} if "tier" in step else {}
        measurement = {**cell, "metrics": RESULT, "server": {"external_hit_rate": 0.4}}
        session.record(step, StepProgress(True, measurement=measurement if cell else None))
    observed = evaluation.run_g2_observed(session.run)
    assert observed["external_hit_rate"] == 0.4
    repetitions = g2_spec()["noise_floor"]["repetitions"]
    assert [pair["repetition"] for pair in observed["aa_pairs"]] == list(range(1, repetitions + 1))


def test_an_outage_is_counted_and_no_task_takes_the_run_before_its_next_try(session):
    assert session.note_outage("connection refused")[1] == 1
    assert session.note_outage("connection refused")[1] == 2
    session.retry_in(60)
    session.release()
    assert services.RunSession.claim_dispatched(session.run.pk) is None  # not due yet
    assert services.runs_due_for_retry() == []
    Run.objects.filter(pk=session.run.pk).update(outage_retry_at=timezone.now())
    assert services.runs_due_for_retry() == [session.run.pk]
    again = services.RunSession.claim_dispatched(session.run.pk)
    assert again is not None and services.runs_due_for_retry() == []  # poked once
    again.host_answered()
    run = Run.objects.get(pk=session.run.pk)
    assert (run.outage_since, run.outage_retries, run.outage_retry_at) == (None, 0, None)
    assert "host unreachable, retrying" in run.log and "host reachable again" in run.log
