from __future__ import annotations

import pytest
from django.urls import reverse

from gates import services
from gates.models import AuditEvent, Gate, Run
from tests.contract import sign_as_both
from tests.gates.services.test_attempts import measured_repetitions, ready_g3, upload
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


def test_pages_require_login(client, engagement):
    response = client.get(reverse("gates:engagement-detail", args=[engagement.pk]))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_login_page_renders(client):
    assert b"Log in" in client.get(reverse("login")).content


def test_an_engagement_page_shows_its_four_gates_honestly_pending(
    client, customer_viewer, engagement
):
    client.force_login(customer_viewer)
    page = client.get(reverse("gates:engagement-detail", args=[engagement.pk])).content.decode()
    for label in (
        "G1 arrival acceptance",
        "G2 functional integration",
        "G3 performance",
        "G4 stability soak",
    ):
        assert label in page
    assert page.count("No verdict yet.") == 1  # only G1 is open; the rest are locked
    assert page.count("Opens when the previous gate passes") == 3


def test_a_vendor_starts_a_run_from_the_gate_page(client, vendor_admin, engagement, host):
    client.force_login(vendor_admin)
    gate = engagement.gates.get(kind="G1")
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert "Start a run" in page
    response = client.post(reverse("gates:run-start", args=[gate.pk]), {"host": host.pk})
    run = Run.objects.get()
    assert response["Location"] == reverse("gates:run-detail", args=[run.pk])
    run_page = client.get(response["Location"]).content.decode()
    assert "<progress" in run_page and "queued" in run_page


def test_a_ready_g4_offers_a_start_button_and_starting_it_queues_a_soak(
    client, vendor_admin, engagement, host
):
    client.force_login(vendor_admin)
    gate = engagement.gates.get(kind="G4")
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert "Start a run" in page and "has no program" not in page
    response = client.post(reverse("gates:run-start", args=[gate.pk]), {"host": host.pk})
    run = Run.objects.get(gate=gate)
    assert response["Location"] == reverse("gates:run-detail", args=[run.pk])
    assert run.state == "queued"


def test_a_viewer_sees_no_start_button_and_cannot_post(client, customer_viewer, engagement, host):
    client.force_login(customer_viewer)
    gate = engagement.gates.get(kind="G1")
    assert (
        "Start a run"
        not in client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    )
    client.post(reverse("gates:run-start", args=[gate.pk]), {"host": host.pk})
    assert not Run.objects.exists()


def test_forms_need_a_csrf_token(vendor_admin, engagement, host):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(vendor_admin)
    gate = engagement.gates.get(kind="G1")
    response = strict.post(reverse("gates:run-start", args=[gate.pk]), {"host": host.pk})
    assert response.status_code == 403 and not Run.objects.exists()


def test_stop_loss_review_from_the_page_is_audited(
    client, vendor_admin, actor, vendor_viewer, engagement, host
):
    gate = engagement.gates.get(kind="G1")
    sign_as_both(gate)
    for _ in range(2):
        run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
        services.run_claim(run_id=run.pk)
        services.decision_record(run_id=run.pk, result={"verdict": "fail", "clauses": []})
    client.force_login(vendor_admin)
    assert (
        "Stop-loss review"
        in client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    )
    client.post(
        reverse("gates:gate-review", args=[gate.pk]),
        {"action": "waive", "justification": "The customer accepts the miss in writing."},
    )
    assert Gate.objects.get(pk=gate.pk).state == Gate.State.WAIVED
    assert AuditEvent.objects.filter(action="gate.waive", actor=vendor_admin).exists()


def test_healthz_reports_the_database_and_the_worker_canary(client):
    response = client.get("/healthz")
    checks = response.json()["checks"]
    assert response.status_code == 200 and response.json()["status"] == "degraded"
    assert checks["database"]["ok"] and checks["broker"]["ok"] and checks["cache"]["ok"]
    assert not checks["worker"]["ok"] and checks["worker"]["details"] == {"canary_age_s": None}


def test_the_gate_page_shows_the_spec_field_by_field_and_what_the_new_version_changed(
    client, actor, vendor_admin, engagement
):
    from gates.specs import validation as gate_specs

    gate = engagement.gates.get(kind="G1")
    document = gate_specs.default_spec("G1")
    document["expect"]["gpu_count"] = 4
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert "What v2 changed from v1" in page
    changes = page.split('id="spec-changes"')[1].split("</table>")[0]
    assert (
        '<th scope="row">GPUs on the host, exactly <code class="field-path">expect.gpu_count'
        "</code></th><td>8 GPUs</td><td>4 GPUs</td>"
    ) in changes
    fields = page.split('id="spec-fields"')[1].split("</table>")[0]
    assert (
        '<th scope="row">GPUs on the host, exactly <code class="field-path">expect.gpu_count'
        "</code></th><td>4 GPUs</td>"
    ) in fields


def test_the_host_picker_offers_the_host_this_engagements_last_run_used(
    client, actor, vendor_viewer, vendor_admin, customer_org, engagement
):
    from tests.conftest import make_host

    make_host(customer_org, name="a-first")
    second = make_host(customer_org, name="b-second")
    g1 = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=g1, host=second)
    services.run_cancel(
        actor=actor, viewer=vendor_viewer, run=run, reason="the test stops this run"
    )
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:gate-detail", args=[g1.pk])).content.decode()
    assert f'<option value="{second.pk}" selected>' in page
    assert "Run #1</a>" in page  # a labelled link, not a bare number


def test_a_waiver_says_it_was_recorded(client, vendor_admin, engagement):
    gate = engagement.gates.get(kind="G1")
    Gate.objects.filter(pk=gate.pk).update(state="decided", verdict="fail", stop_loss_review=True)
    client.force_login(vendor_admin)
    response = client.post(
        reverse("gates:gate-review", args=[gate.pk]),
        {"action": "waive", "justification": "accepted by the customer in writing"},
        follow=True,
    )
    assert "G1 review recorded: waived" in response.content.decode()
    assert Gate.objects.get(pk=gate.pk).state == "waived"


def _run_with_file(engagement) -> tuple[Run, object]:
    import hashlib

    from gates.models import Artifact

    gate = engagement.gates.get(kind="G1")
    run = Run.objects.create(
        gate=gate, spec=gate.current_spec, attempt=1, log="probe gpu: ok\n", log_written=14
    )
    body = b'{"completed": 8}\n'
    artifact = Artifact.objects.create(
        run=run,
        name="r1/bench-c8.json",
        tool="vllm-bench",
        sha256=hashlib.sha256(body).hexdigest(),
        size=len(body),
        content=body,
    )
    return run, artifact


def test_a_raw_file_downloads_byte_for_byte_with_its_digest(client, customer_viewer, engagement):
    run, artifact = _run_with_file(engagement)
    client.force_login(customer_viewer)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert artifact.sha256 in page and "Download the whole log" in page
    response = client.get(reverse("gates:run-file", args=[run.pk]) + f"?id={artifact.pk}")
    assert response.status_code == 200 and response.content == b'{"completed": 8}\n'
    assert response["Content-Disposition"] == 'attachment; filename="bench-c8.json"'
    assert response["Content-Digest"].startswith("sha-256=:")
    log = client.get(reverse("gates:run-log", args=[run.pk]))
    assert log.content == b"probe gpu: ok\n"


def test_a_file_of_another_run_is_a_404_through_this_run(client, customer_viewer, engagement):
    run, artifact = _run_with_file(engagement)
    other = Run.objects.create(gate=run.gate, spec=run.spec, attempt=2)
    client.force_login(customer_viewer)
    url = reverse("gates:run-file", args=[other.pk]) + f"?id={artifact.pk}"
    assert client.get(url).status_code == 404
    assert client.get(reverse("gates:run-file", args=[run.pk]) + "?id=x").status_code == 400


def test_the_gate_page_polls_only_its_runs_still_going(client, vendor_admin, engagement, host):
    client.force_login(vendor_admin)
    gate = engagement.gates.get(kind="G1")
    client.post(reverse("gates:run-start", args=[gate.pk]), {"host": host.pk})
    run = Run.objects.get()
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert f'data-run-api="{reverse("api:run-detail", args=[run.pk])}"' in page
    Run.objects.filter(pk=run.pk).update(state="canceled", finished_at=run.created_at)
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert "data-run-api" not in page


def test_the_run_page_shows_a_repetition_set_aside_with_its_reason(
    client, vendor_admin, actor, vendor_viewer, engagement, host
):
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    why = "baseline at tier 4, repetition 3: step of +21 % in TTFT at request 33 of 64"
    services.decision_record(
        run_id=run.pk,
        result={
            "verdict": "inconclusive",
            "clauses": [],
            "set_aside": [{"repetition": 3, "reasons": [why]}],
            "notes": ["step check skipped for offload at tier 16, repetition(s) 1: too few"],
        },
    )
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert "repetition 3: " + why in page and "step check skipped for offload" in page


def test_the_cancel_form_and_the_api_say_whether_the_g3_attempt_is_spent_before_a_cancel(
    client, vendor_admin, vendor_org, actor, vendor_viewer, engagement
):
    gate = ready_g3(engagement)
    run = upload(actor, vendor_viewer, gate)
    client.force_login(vendor_admin)
    url = reverse("gates:run-detail", args=[run.pk])
    page = client.get(url).content.decode()
    assert "canceling now spends nothing" in page and "stays spent" not in page
    measured_repetitions(run, 1)  # one complete repetition, long before the first look
    page = client.get(url).content.decode()
    assert "does not give the share back" in page and 'stays spent.">' in page
    api = token_client(vendor_admin, vendor_org, scopes=["read"])
    record = api.get(reverse("api:run-detail", args=[run.pk])).json()
    assert record["state"] == "running" and record["spent_attempt"] is True
    services.run_cancel(actor=actor, viewer=vendor_viewer, run=run, reason="numbers look weak")
    page = client.get(url).content.decode()
    assert "This run spent attempt 1's share" in page and 'id="cancel-reason"' not in page
