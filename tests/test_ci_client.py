"""bin/tollgate-ci against a live Tollgate: exit codes by verdict, progress, auth errors, and
the JUnit and Markdown reports CI systems show (read back with a JUnit parser, not by string)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from gates import services
from gates.evidence import bundle_for_decision
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


def decided_run(actor, viewer, engagement, host, verdict: str, clauses=None) -> Run:
    sign_as_both(engagement.gates.get(kind="G1"))
    run = services.run_create(
        actor=actor, viewer=viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    services.run_claim(run_id=run.pk)
    clauses = clauses or [{"check": "gpu_count", "verdict": verdict, "cause": "8 observed"}]
    services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": clauses})
    return run


def g3_cell(tier: int, verdict: str, estimate: float, low: float, high: float, **more) -> dict:
    return {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "tier": tier,
        "threshold": 25,
        "estimate": estimate,
        "low": low,
        "high": high,
        "verdict": verdict,
        "cause": f"interval at c={tier}",
        **more,
    }


def junit_cases(path: Path) -> dict:
    """{case name: (result class or None, message)}, after checking the counts CI reads."""
    report = JUnitXml.fromfile(str(path))
    (suite,) = list(report)
    cases = list(suite)
    assert (report.tests, suite.tests) == (len(cases), len(cases))
    assert suite.failures == sum(case.is_failure for case in cases)
    assert suite.skipped == sum(case.is_skipped for case in cases)
    assert suite.errors == sum(case.is_error for case in cases)
    return {
        case.name: (
            type(case.result[0]) if case.result else None,
            case.result[0].message if case.result else None,
        )
        for case in cases
    }


@pytest.fixture(autouse=True)
def no_stray_messages():
    yield
    purge_broker()


@pytest.mark.parametrize(
    "verdict, code, element",
    [("pass", 0, None), ("fail", 1, Failure), ("inconclusive", 2, Skipped), ("invalid", 3, Error)],
)
def test_waiting_for_a_run_exits_with_its_verdict_and_reports_it(
    live_server, token, actor, vendor_viewer, engagement, host, tmp_path, verdict, code, element
):
    run = decided_run(actor, vendor_viewer, engagement, host, verdict)
    junit, summary = tmp_path / "report.xml", tmp_path / "summary.md"
    result = ci(
        live_server,
        token,
        "wait-run",
        str(run.pk),
        "--timeout",
        "30",
        "--junit",
        str(junit),
        "--summary",
        str(summary),
    )
    assert result.returncode == code, result.stdout + result.stderr
    assert f"run {run.pk}: {verdict}" in result.stdout and "GPU count" in result.stdout
    assert junit_cases(junit) == {"GPU count": (element, None if element is None else "GPU count")}
    assert f"| {verdict} | GPU count |  | 8 observed |" in summary.read_text()


def test_a_g3_report_has_one_case_per_clause_and_tier_with_the_numbers(
    live_server, token, actor, vendor_viewer, engagement, host, tmp_path
):
    cells = [
        g3_cell(8, "pass", 31.0, 27.5, 34.2),
        g3_cell(16, "fail", 18.2, 12.1, 23.4),
        g3_cell(4, "inconclusive", 24.0, 19.0, 29.0),
        g3_cell(
            16,
            "pass",
            9.1,
            8.8,
            9.5,
            compare="recompute/offload",
            change="ratio",
            metric="ttft_p50",
            threshold=8.6,
        ),
    ]
    run = decided_run(actor, vendor_viewer, engagement, host, "fail", clauses=cells)
    junit, summary = tmp_path / "report.xml", tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result = ci(
        live_server,
        token,
        "wait-run",
        str(run.pk),
        "--junit",
        str(junit),
        "--summary",
        str(summary),
    )
    assert result.returncode == 1, result.stderr
    assert junit_cases(junit) == {
        "TTFT p50 reduction at c=8": (None, None),
        "TTFT p50 reduction at c=16": (
            Failure,
            "TTFT p50 reduction at c=16: 18.2 % [12.1, 23.4] vs 25 %",
        ),
        "TTFT p50 reduction at c=4": (Skipped, "TTFT p50 reduction at c=4: 24 % [19, 29] vs 25 %"),
        "TTFT p50 recompute/offload ratio at c=16": (None, None),
    }
    text = summary.read_text()
    assert text.startswith("earlier step\n"), "the summary is appended, as GitHub expects"
    assert "| fail | TTFT p50 reduction at c=16 | 18.2 % [12.1, 23.4] vs 25 % |" in text


def test_a_run_that_ended_in_an_infra_error_exits_3_and_reports_an_error(
    live_server, token, actor, vendor_viewer, engagement, host, tmp_path
):
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    services.run_claim(run_id=run.pk)
    services.run_fail(run_id=run.pk, outcome="infra_error", reason="host unreachable")
    junit, summary = tmp_path / "report.xml", tmp_path / "summary.md"
    result = ci(
        live_server,
        token,
        "wait-run",
        str(run.pk),
        "--junit",
        str(junit),
        "--summary",
        str(summary),
    )
    assert result.returncode == 3 and "infra_error: host unreachable" in result.stderr
    assert junit_cases(junit) == {f"run {run.pk}": (Error, "ended infra_error: host unreachable")}
    assert "ended infra_error: host unreachable" in summary.read_text()


def test_start_queues_a_run_and_wait_gate_reads_the_gate(
    live_server, token, actor, vendor_viewer, engagement, host, tmp_path
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
    junit = tmp_path / "gate.xml"
    gate = ci(live_server, token, "wait-gate", str(run.gate_id), "--junit", str(junit))
    assert gate.returncode == 0 and "(G1): pass" in gate.stdout
    assert junit_cases(junit) == {f"gate {run.gate_id} (G1)": (None, None)}


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


def test_a_start_retried_with_its_idempotency_key_gets_the_first_run(
    live_server, token, engagement, host
):
    gate = str(engagement.gates.get(kind="G1").pk)
    args = ("start", gate, "--host", host.name, "--idempotency-key", "gh-4711")
    first, again = ci(live_server, token, *args), ci(live_server, token, *args)
    run = Run.objects.get()
    assert first.returncode == again.returncode == 0, again.stderr
    assert f"run {run.pk} started" in first.stdout and f"run {run.pk} started" in again.stdout
    other = ci(live_server, token, "start", gate, "--host", host.name)
    assert other.returncode != 0 and Run.objects.count() == 1, "a fresh key is a new start"


def test_evidence_downloads_the_bundle_the_server_signed_and_refuses_an_undecided_gate(
    live_server, token, actor, vendor_viewer, engagement, host, tmp_path
):
    run = decided_run(actor, vendor_viewer, engagement, host, "pass")
    gate = run.gate
    target = tmp_path / "evidence.zip"
    result = ci(live_server, token, "evidence", str(gate.pk), "-o", str(target))
    assert result.returncode == 0, result.stdout + result.stderr
    data, digest = bundle_for_decision(gate.decisions.get())
    assert target.read_bytes() == data
    assert f"sha256 {digest}" in result.stdout and "tollgate-verify" in result.stdout
    undecided = engagement.gates.get(kind="G2")
    refused = ci(live_server, token, "evidence", str(undecided.pk), "-o", str(tmp_path / "no.zip"))
    assert refused.returncode == 4 and "has no decision yet" in refused.stderr
    assert not (tmp_path / "no.zip").exists() and not list(tmp_path.glob("*.partial"))
