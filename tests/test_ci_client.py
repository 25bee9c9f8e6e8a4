"""bin/tollgate-ci against a live Tollgate: exit codes by verdict, progress, auth errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gates import services
from gates.models import Run
from gates.tenancy import viewer_for_user
from tests.celeryproc import purge_broker
from tests.contract import sign_as_both

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CLIENT = Path(__file__).resolve().parents[1] / "bin" / "tollgate-ci"


@pytest.fixture
def token(vendor_admin, vendor_org) -> str:
    _, secret = services.api_token_create(
        actor=services.Actor(user=vendor_admin),
        viewer=viewer_for_user(vendor_admin),
        organization=vendor_org,
        name="ci",
        scopes=["read", "run"],
    )
    return secret


def ci(live_server, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOLLGATE_TOKEN": token}
    return subprocess.run(
        [sys.executable, str(CLIENT), "--url", live_server.url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def decided_run(actor, viewer, engagement, host, verdict: str) -> Run:
    sign_as_both(engagement.gates.get(kind="G1"))
    run = services.run_create(
        actor=actor, viewer=viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    services.run_claim(run_id=run.pk)
    clause = {"check": "gpu_count", "verdict": verdict, "cause": "8 observed"}
    services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": [clause]})
    return run


@pytest.fixture(autouse=True)
def no_stray_messages():
    yield
    purge_broker()


@pytest.mark.parametrize(
    "verdict, code", [("pass", 0), ("fail", 1), ("inconclusive", 2), ("invalid", 3)]
)
def test_waiting_for_a_run_exits_with_its_verdict(
    live_server, token, actor, vendor_viewer, engagement, host, verdict, code
):
    run = decided_run(actor, vendor_viewer, engagement, host, verdict)
    result = ci(live_server, token, "wait-run", str(run.pk), "--timeout", "30")
    assert result.returncode == code, result.stdout + result.stderr
    assert f"run {run.pk}: {verdict}" in result.stdout and "gpu_count" in result.stdout


def test_a_run_that_ended_in_an_infra_error_exits_3(
    live_server, token, actor, vendor_viewer, engagement, host
):
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    services.run_claim(run_id=run.pk)
    services.run_fail(run_id=run.pk, outcome="infra_error", reason="host unreachable")
    result = ci(live_server, token, "wait-run", str(run.pk))
    assert result.returncode == 3 and "infra_error: host unreachable" in result.stderr


def test_start_queues_a_run_and_wait_gate_reads_the_gate(
    live_server, token, actor, vendor_viewer, engagement, host
):
    sign_as_both(engagement.gates.get(kind="G1"))
    result = ci(
        live_server, token, "start", str(engagement.gates.get(kind="G1").pk), "--host", host.name
    )
    assert result.returncode == 0, result.stderr
    run = Run.objects.get()
    assert f"run {run.pk} started" in result.stdout and run.state == "queued"
    services.run_claim(run_id=run.pk)
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": []})
    gate = ci(live_server, token, "wait-gate", str(run.gate_id))
    assert gate.returncode == 0 and "(G1): pass" in gate.stdout


def test_a_rehearsal_run_reports_its_verdict_marked_as_not_counting(
    live_server, token, actor, vendor_viewer, engagement, host
):
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    services.run_claim(run_id=run.pk)
    services.decision_record(run_id=run.pk, result={"verdict": "fail", "clauses": []})
    result = ci(live_server, token, "wait-run", str(run.pk))
    assert result.returncode == 1 and f"run {run.pk}: fail" in result.stdout
    assert "is a rehearsal: its verdict does not count" in result.stderr


def test_a_wrong_token_or_a_foreign_object_is_a_usage_error(
    live_server, token, actor, vendor_viewer, engagement, host
):
    run = decided_run(actor, vendor_viewer, engagement, host, "pass")
    assert ci(live_server, "tg_000000000000_wrong", "wait-run", str(run.pk)).returncode == 4
    assert ci(live_server, token, "wait-run", "999999").returncode == 4


def test_without_a_token_it_says_how_to_give_one(live_server):
    result = subprocess.run(
        [sys.executable, str(CLIENT), "--url", live_server.url, "wait-run", "1"],
        env={k: v for k, v in os.environ.items() if k != "TOLLGATE_TOKEN"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 4 and "TOLLGATE_TOKEN" in result.stderr
