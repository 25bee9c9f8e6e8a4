"""G1-G3 end to end: real sshd on loopback, real simhost behind it, the real task code.

Tasks run in this process one after another (the worker-fault tests use real Celery workers);
each test's specs are sized so a run takes seconds.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from gates import services
from gates.demo.world import SHORT_CHAT
from gates.evidence import bundle_for_decision
from gates.evidence.verify import verify_bundle
from gates.models import Artifact, Gate, Host, Measurement, Run
from gates.services import pokes
from runners.program.driver import stop_all
from runners.transport import LocalTransport
from tests.contract import sign_as_both
from tests.simhosts import LMCACHE_SETUPS, g1_spec, g2_spec, g3_spec, ssh_simhost, use_lmcache
from tests.sshd import wait_for
from worker import tasks

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
MAX_TASKS = 200


@pytest.fixture(autouse=True)
def tasks_run_here(monkeypatch, settings):
    """advance_run hands over to a fresh task by enqueueing; here the test is the worker.

    A short task budget makes runs change hands often, as they do over hours in production.
    """
    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    settings.TOLLGATE_TASK_BUDGET_S = 3


@pytest.fixture
def sim_host(customer_org, own_sshd, tmp_path) -> Host:
    return ssh_simhost(customer_org, own_sshd, tmp_path / "host")


def drive(run: Run, *, until=None) -> Run:
    """Run advance_run task after task until the run ends (or `until(run)` holds)."""
    for _ in range(MAX_TASKS):
        tasks.advance_run(run.pk)
        run.refresh_from_db()
        if run.is_ended or (until and until(run)):
            return run
    raise AssertionError(f"run {run.pk} did not end within {MAX_TASKS} tasks:\n{run.log}")


def start(actor, viewer, engagement, kind: str, host: Host, document: dict) -> Run:
    gate = engagement.gates.get(kind=kind)
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    return services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)


def pass_gate(actor, viewer, engagement, kind: str, host: Host) -> None:
    """Record a pass for a gate the test is not about, through the services."""
    sign_as_both(engagement.gates.get(kind=kind))
    run = services.run_create(
        actor=actor, viewer=viewer, gate=engagement.gates.get(kind=kind), host=host
    )
    services.run_claim(run_id=run.pk)
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": []})


def host_processes_gone(run: Run) -> bool:
    local = LocalTransport()
    return all(not local.status(path).group_alive for path in services.run_remote_dirs(run))


def test_an_offload_helps_host_passes_g1_g2_and_g3(actor, vendor_viewer, engagement, sim_host):
    g1 = drive(start(actor, vendor_viewer, engagement, "G1", sim_host, g1_spec()))
    assert (g1.outcome, g1.gate.decisions.first().verdict) == ("completed", "pass"), g1.log
    g2 = drive(start(actor, vendor_viewer, engagement, "G2", sim_host, g2_spec()))
    decision = g2.gate.decisions.first()
    assert decision.verdict == "pass", decision.clauses
    assert {row["check"] for row in decision.clauses} == {
        "health",
        "equivalence",
        "offload_hit",
        "noise_floor",
    }
    g3 = drive(start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec()))
    decision = g3.gate.decisions.first()
    assert decision.verdict == "pass", decision.result["reasons"]
    for clause in decision.clauses:
        assert clause["verdict"] == "pass"
        assert clause["low"] is not None and clause["low"] <= clause["estimate"] <= clause["high"]
    ttft = next(
        c
        for c in decision.clauses
        if c["compare"] == "offload/baseline" and c["metric"] == "ttft_p50"
    )
    assert ttft["estimate"] > 25
    assert Gate.objects.get(pk=g3.gate_id).state == Gate.State.DECIDED
    assert engagement.gates.get(kind="G4").state == Gate.State.READY
    assert g3.progress_done == g3.progress_total > 0
    assert host_processes_gone(g3)


def test_g3_measurements_keep_their_raw_files_with_digests(
    actor, vendor_viewer, engagement, sim_host
):
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
    run = drive(start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec()))
    measurements = Measurement.objects.filter(run=run)
    repetitions = sorted({m.repetition for m in measurements})
    assert repetitions == [1, 2, 3, 4]  # min 4, max 4
    assert {(m.arm, m.repetition) for m in measurements} == {
        (arm, r) for arm in ("baseline", "offload", "recompute") for r in repetitions
    }
    for measurement in measurements:
        assert measurement.artifact is not None and len(measurement.artifact.sha256) == 64
        assert measurement.metrics["completed"] == 32
        assert measurement.server["prefix_caching"] is (measurement.arm != "recompute")
    offload = measurements.filter(arm="offload").first()
    assert offload.server["external_hit_rate"] > 0.2
    assert Artifact.objects.filter(run=run, tool="vllm-metrics").count() >= 12
    # The live log carries each bench's own output lines, bounded.
    assert "| Successful requests:" in run.log and len(run.log) <= 64 * 1024, run.log[:3000]


def test_offload_that_does_not_help_fails_g3_then_opens_stop_loss(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host", scenario="offload-does-not-help")
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    # Short random prompts share no prefix, so keeping KV (offload) and recomputing it cost the
    # same: the scenario's recompute/offload TTFT ratio is 1.0x (docs/simhost.md). Against the
    # template's 8.6x bar the log-ratio sits ln 8.6 = 2.15 short; the engine fails a cell when
    # its t passes the gate-wide fail critical value (one look at 4 pairs, Holm over 2 cells,
    # 2 attempts: t 4.2, see inputs.plan.first_fail_critical_t), so only a repetition-to-
    # repetition sd of the log-ratio above 2.15 * 2 / 4.2 = 1.0 could keep it open.
    ratio = {
        "metric": "ttft_p50",
        "compare": "recompute/offload",
        "change": "ratio",
        "at_least": 8.6,
        "tiers": "all",
    }
    reduction = {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "at_least_pct": 25,
        "tiers": "all",
    }
    document = g3_spec(
        workload=SHORT_CHAT, tiers=[1], repetitions=(4, 4), clauses=[ratio, reduction]
    )
    # No reuse means the tier is never hit; that is this workload's truth, not a broken run.
    document["validity"]["min_external_hit_rate"] = 0
    for attempt in (1, 2):
        run = drive(start(actor, vendor_viewer, engagement, "G3", host, document))
        decision = run.gate.decisions.first()
        assert (run.outcome, decision.verdict) == ("completed", "fail"), decision.result
        ratio_cell, reduction_cell = decision.clauses
        assert ratio_cell["verdict"] == "fail", ratio_cell
        assert ratio_cell["high"] < 8.6 and 0.5 < ratio_cell["estimate"] < 2, ratio_cell
        assert reduction_cell["estimate"] < 25, reduction_cell
        gate = engagement.gates.get(kind="G3")
        # The first fail is a strike with an attempt left; the second spends the last one.
        assert gate.stop_loss_review is (attempt == 2)
        assert gate.can_move_to(Gate.State.RUNNING) is (attempt == 1)
    events = list(gate.alerts.order_by("pk").values_list("event", flat=True))
    assert events == ["gate_failed", "stop_loss_review"]


def test_a_host_without_the_offload_tier_fails_g1(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host", preset="h100x8-no-tier")
    run = drive(start(actor, vendor_viewer, engagement, "G1", host, g1_spec()))
    decision = run.gate.decisions.first()
    assert decision.verdict == "fail"
    failed = [row["check"] for row in decision.clauses if row["ok"] is False]
    assert failed == ["offload_tier"]


def test_wrong_output_with_offload_fails_g2(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host", faults={"wrong_output_rate": 1.0})
    pass_gate(actor, vendor_viewer, engagement, "G1", host)
    run = drive(start(actor, vendor_viewer, engagement, "G2", host, g2_spec()))
    decision = run.gate.decisions.first()
    assert decision.verdict == "fail"
    equivalence = next(row for row in decision.clauses if row["check"] == "equivalence")
    assert equivalence["verdict"] == "fail"


def test_sshd_stopped_mid_run_without_a_retry_window_is_an_infra_error_at_once(
    actor, vendor_viewer, engagement, sim_host, own_sshd
):
    """A window of 0 gives up at the first failure (test_outages.py rides one out): the lease
    is released, and the leftovers are a pending cleanup that keeps the host from new runs."""
    sim_host.parameters = {**sim_host.parameters, "transport_retry_window_s": 0}
    sim_host.save(update_fields=["parameters"])
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
    run = start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec())
    run = drive(run, until=lambda r: r.measurements.exists())
    own_sshd.stop()
    try:
        run = drive(run)
    finally:
        own_sshd.start()
        kill_leftovers(run)
    assert (run.state, run.outcome) == (Run.State.FINISHED, Run.Outcome.INFRA_ERROR)
    assert Host.objects.get(pk=sim_host.pk).lease_run is None
    assert services.host_cleanup_pending(sim_host.pk).run_id == run.pk
    gate = run.gate
    gate.refresh_from_db()
    assert gate.verdict == "pending" and not gate.decisions.exists()


def test_cancel_mid_g3_stops_the_host_processes_within_seconds(
    actor, vendor_viewer, engagement, sim_host, settings
):
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
    run = start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec())
    # One host poll per task, so a task always ends with a launched step still running; with a
    # budget of seconds a fast machine can finish every step inside its tasks and the run ends
    # before the test gets to cancel it.
    settings.TOLLGATE_TASK_BUDGET_S = 0
    run = drive(
        run, until=lambda r: r.steps.filter(state="started", name__contains="c=16").exists()
    )
    services.run_cancel(
        actor=actor, viewer=vendor_viewer, run=run, reason="the test stops this run"
    )
    run = drive(run)
    assert run.state == Run.State.CANCELED
    assert wait_for(lambda: host_processes_gone(run), timeout=10)
    assert Host.objects.get(pk=sim_host.pk).lease_run is None


def kill_leftovers(run: Run) -> None:
    stop_all(LocalTransport(), services.run_remote_dirs(run))


def test_the_reaper_ends_a_run_whose_worker_vanished_and_stops_its_host_processes(
    actor, vendor_viewer, engagement, sim_host, settings
):
    from datetime import timedelta

    from django.utils import timezone

    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
    run = start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec())
    # Stop between two tasks while something of the run is alive on the host (a server): one
    # host poll per task, so no task starts and stops a server before the test looks.
    settings.TOLLGATE_TASK_BUDGET_S = 0
    run = drive(run, until=lambda r: r.steps.exists() and not host_processes_gone(r))
    assert not run.is_ended, run.reason
    # The worker died: no heartbeat for longer than the limit, its claim expired.
    long_ago = timezone.now() - timedelta(seconds=settings.TOLLGATE_RUN_STALE_AFTER_S + 1)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=long_ago, driver_until=None)
    tasks.reap_stale_runs()
    run.refresh_from_db()
    assert (run.state, run.outcome) == (Run.State.FINISHED, Run.Outcome.INFRA_ERROR)
    assert "no heartbeat" in run.reason
    assert Host.objects.get(pk=sim_host.pk).lease_run is None
    assert wait_for(lambda: host_processes_gone(run), timeout=15)


@pytest.mark.parametrize("setup", LMCACHE_SETUPS)
def test_with_lmcache_the_offload_cells_carry_lmcaches_counters_as_their_hit_proof(
    actor, vendor_viewer, engagement, sim_host, setup
):
    use_lmcache(sim_host, setup)
    for kind, spec in (("G1", g1_spec()), ("G2", g2_spec())):
        if setup != "profile":  # the simhost profile's own G1 and G2 are tested above
            pass_gate(actor, vendor_viewer, engagement, kind, sim_host)
            continue
        gate = drive(start(actor, vendor_viewer, engagement, kind, sim_host, spec))
        decision = gate.gate.decisions.first()
        assert decision.verdict == "pass", (kind, decision.clauses)
    run = drive(start(actor, vendor_viewer, engagement, "G3", sim_host, g3_spec()))
    assert "lmcache healthy" in run.log, run.log[-3000:]
    offload = Measurement.objects.filter(run=run, arm="offload")
    assert offload.count() == 4
    for measurement in offload:
        facts = measurement.server["side_services"]["lmcache"]
        assert measurement.server["hit_proof"] == "lmcache"
        # Behind LMCacheMPConnector vLLM reports no offloading of its own; LMCache's ran.
        assert measurement.server["offload_enabled"] is True
        # simhost's LMCache counts what its one offload tier looked up and hit.
        assert facts["lookup_hit_rate"] == pytest.approx(measurement.server["external_hit_rate"])
        assert facts["hit_l1_tokens"] == facts["hit_tokens"] > 0
    baseline = Measurement.objects.filter(run=run, arm="baseline").first()
    assert "side_services" not in baseline.server
    kept = set(
        Artifact.objects.filter(run=run, tool="lmcache-metrics").values_list("name", flat=True)
    )
    assert "offload-c16-r1/lmcache-metrics-before.txt" in kept
    assert "offload-c16-r1/lmcache-metrics-after.txt" in kept
    decision = run.gate.decisions.first()
    hit_checks = [c for c in decision.result["validity"] if c["check"] == "external_hit_rate"]
    assert hit_checks and all("lmcache lookup hit rate" in c["reason"] for c in hit_checks)
    # The offline verifier reads LMCache's kept pages again: its counters, its hit proof.
    report = verify_bundle(bundle_for_decision(decision)[0])
    assert report.ok, report.problems
    names = zipfile.ZipFile(io.BytesIO(bundle_for_decision(decision)[0])).namelist()
    assert any(name.endswith("offload-c16-r1/lmcache-metrics-after.txt") for name in names)
