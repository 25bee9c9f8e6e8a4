"""The REST contract CI relies on: shapes, status codes, JSON errors, token handling."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from gates import services
from gates.models import ApiToken, AuditEvent, Gate, Host, Run
from gates.specs import validation as specs
from gates.tenancy import viewer_for_user
from tests.conftest import HOST_KEY, PRIVATE_KEY
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def vendor_api(vendor_admin, vendor_org) -> APIClient:
    return token_client(vendor_admin, vendor_org, scopes=["read", "run", "sign"])


def test_unauthenticated_requests_get_a_json_401(engagement):
    response = APIClient().get(reverse("api:engagement-list"))
    assert response.status_code in (401, 403)
    assert set(response.json()) >= {"error", "detail"}


def test_a_token_in_the_query_string_is_refused(vendor_admin, vendor_org):
    _, secret = services.api_token_create(
        actor=services.Actor(user=vendor_admin),
        viewer=viewer_for_user(vendor_admin),
        organization=vendor_org,
        name="ci",
        scopes=["read"],
    )
    response = APIClient().get(reverse("api:engagement-list") + f"?token={secret}")
    assert response.status_code in (401, 403)


@pytest.mark.parametrize("change", ["revoked_at", "expires_at"])
def test_a_revoked_or_expired_token_is_refused(vendor_admin, vendor_org, change):
    api = token_client(vendor_admin, vendor_org)
    ApiToken.objects.update(**{change: timezone.now() - timedelta(seconds=1)})
    assert api.get(reverse("api:engagement-list")).status_code in (401, 403)


def test_a_vendor_creates_an_engagement_with_its_four_gates(vendor_api, customer_org):
    response = vendor_api.post(
        reverse("api:engagement-list"),
        {"organization": "northwind", "title": "T", "model_name": "qwen3-480b"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert [(g["kind"], g["state"], g["verdict"]) for g in body["gates"]] == [
        ("G1", "ready", "pending"),
        ("G2", "locked", "pending"),
        ("G3", "locked", "pending"),
        ("G4", "locked", "pending"),
    ]


def test_a_customer_cannot_create_engagements(customer_owner, customer_org):
    api = token_client(customer_owner, customer_org, scopes=["run"])
    response = api.post(
        reverse("api:engagement-list"),
        {"organization": "northwind", "title": "T", "model_name": "m"},
        format="json",
    )
    assert response.status_code == 403


def test_a_missing_field_is_named(vendor_api, customer_org):
    response = vendor_api.post(
        reverse("api:engagement-list"), {"organization": "northwind"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid" and response.json()["field"] == "title"


def test_a_bad_spec_version_is_refused_with_the_field(vendor_api, engagement):
    gate = engagement.gates.get(kind="G3")
    document = specs.default_spec("G3")
    document["tiers"] = [0]
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]), {"document": document}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_spec",
        "field": "tiers[0]",
        "detail": response.json()["detail"],
    }
    assert gate.specs.count() == 1


def test_put_spec_makes_a_new_version_and_sign_freezes_it(vendor_api, engagement):
    gate = engagement.gates.get(kind="G4")
    document = specs.default_spec("G4")
    document["duration_h"] = 48
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]), {"document": document}, format="json"
    )
    assert response.status_code == 201 and response.json()["version"] == 2
    signed = vendor_api.post(
        reverse("api:gate-spec-sign", args=[gate.pk]), {"version": 2}, format="json"
    ).json()
    assert signed["frozen"] and signed["vendor_signed_by"] == "vadmin"


def test_starting_a_run_answers_202_with_progress(vendor_api, engagement, host):
    gate = engagement.gates.get(kind="G1")
    response = vendor_api.post(
        reverse("api:gate-runs", args=[gate.pk]), {"host": host.name}, format="json"
    )
    assert response.status_code == 202
    run = response.json()
    assert run["state"] == "queued" and run["progress"] == {"done": 0, "total": 0}
    detail = vendor_api.get(reverse("api:run-detail", args=[run["id"]])).json()
    assert detail["spec_version"] == 1 and detail["host"] == host.name
    assert (detail["carried_from"], detail["carried_repetitions"], detail["first_repetition"]) == (
        None,
        0,
        1,
    )


def test_a_second_run_on_a_busy_gate_is_a_409(vendor_api, engagement, host):
    gate = engagement.gates.get(kind="G1")
    url = reverse("api:gate-runs", args=[gate.pk])
    vendor_api.post(url, {"host": host.name}, format="json")
    response = vendor_api.post(url, {"host": host.name}, format="json")
    assert response.status_code == 409 and response.json()["error"] == "illegal_transition"


def test_uploading_a_soak_is_a_409_that_writes_nothing(vendor_api, engagement, host):
    gate = engagement.gates.get(kind="G4")
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    start = {"upload": True}
    response = vendor_api.post(reverse("api:gate-runs", args=[gate.pk]), start, format="json")
    assert response.status_code == 409
    assert response.json() == {
        "error": "not_runnable",
        "detail": "a G4 soak is run on a host by its agent; it cannot be uploaded",
        "field": "upload",
    }
    assert not Run.objects.exists()
    assert Host.objects.get(pk=host.pk).lease_run is None


def test_cancelling_a_queued_run_ends_it(vendor_api, engagement, host):
    gate = engagement.gates.get(kind="G1")
    run = vendor_api.post(
        reverse("api:gate-runs", args=[gate.pk]), {"host": host.name}, format="json"
    ).json()
    refused = vendor_api.post(reverse("api:run-cancel", args=[run["id"]]), {}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "reason"
    too_short = vendor_api.post(
        reverse("api:run-cancel", args=[run["id"]]), {"reason": "because"}, format="json"
    )
    assert too_short.status_code == 400 and too_short.json()["field"] == "reason"
    response = vendor_api.post(
        reverse("api:run-cancel", args=[run["id"]]),
        {"reason": "the host is needed for a driver update"},
        format="json",
    )
    assert response.status_code == 202 and response.json()["state"] == "canceled"
    assert response.json()["reason"] == (
        "canceled before it started: the host is needed for a driver update"
    )
    assert response.json()["spent_attempt"] is False
    assert Host.objects.get(pk=host.pk).lease_run is None


def test_hosts_never_return_key_material(vendor_api, customer_org):
    response = vendor_api.post(
        reverse("api:host-list"),
        {
            "organization": "northwind",
            "name": "gpu-9",
            "profile": "vllm",
            "address": "10.1.1.1",
            "username": "bench",
            "host_key": HOST_KEY,
            "private_key": PRIVATE_KEY,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    listing = vendor_api.get(reverse("api:host-list")).content.decode()
    assert "PRIVATE KEY" not in listing and "b3BlbnNzaC1rZXktdjE" not in listing
    assert response.json()["has_stored_credential"] is True
    assert AuditEvent.objects.filter(action="host.create").exists()


def test_a_host_without_a_pinned_key_is_refused(vendor_api, customer_org):
    response = vendor_api.post(
        reverse("api:host-list"),
        {
            "organization": "northwind",
            "name": "gpu-9",
            "profile": "vllm",
            "address": "10.1.1.1",
            "username": "bench",
            "key_file_path": "/k",
        },
        format="json",
    )
    assert response.status_code == 400 and response.json()["field"] == "host_key"


def test_samples_page_by_sequence_number(vendor_api, engagement, host):
    from gates.models import SoakSample

    run = Run.objects.create(
        gate=engagement.gates.get(kind="G1"),
        spec=engagement.gates.get(kind="G1").current_spec,
        attempt=1,
    )
    now = timezone.now()
    for seq in range(1, 4):
        SoakSample.objects.create(
            run=run, seq=seq, window_start=now, window_end=now, metrics={"completed": seq}
        )
    body = vendor_api.get(reverse("api:run-samples", args=[run.pk]) + "?after=1").json()
    assert [s["seq"] for s in body["results"]] == [2, 3] and body["next_after"] is None


def test_the_openapi_schema_is_served(vendor_api):
    response = vendor_api.get(reverse("api-schema"), HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/gates/{id}/runs/" in paths and "/api/v1/runs/{id}/cancel/" in paths


@pytest.mark.django_db(transaction=True)
def test_a_run_is_accepted_and_kept_when_the_broker_is_down(
    vendor_api, engagement, host, monkeypatch
):
    from gates.services import pokes

    def broker_down(task_name, *args):
        raise ConnectionRefusedError("redis is down")

    monkeypatch.setattr(pokes, "send", broker_down)
    gate = engagement.gates.get(kind="G1")
    response = vendor_api.post(
        reverse("api:gate-runs", args=[gate.pk]), {"host": host.name}, format="json"
    )
    assert response.status_code == 202
    run = Run.objects.get(pk=response.json()["id"])
    assert run.state == "queued" and run.last_dispatched_at is None
    # The beat's re-dispatch picks it up: it was never poked.
    assert run.pk in services.runs_to_redispatch(older_than_s=60)


def _logged_run(engagement, log: str, written: int) -> Run:
    gate = engagement.gates.get(kind="G1")
    return Run.objects.create(
        gate=gate, spec=gate.current_spec, attempt=1, log=log, log_written=written
    )


def test_a_run_carries_its_newest_log_lines_and_polls_on_from_an_offset(vendor_api, engagement):
    run = _logged_run(engagement, "probe gpu: ok\nprobe disk: ok\n", 29)
    url = reverse("api:run-detail", args=[run.pk])
    tail = vendor_api.get(url).json()["log_tail"]
    assert tail == {
        "text": "probe gpu: ok\nprobe disk: ok\n",
        "offset": 0,
        "next": 29,
        "skipped": False,
    }
    Run.objects.filter(pk=run.pk).update(log=run.log + "bench c=8: done\n", log_written=45)
    after = vendor_api.get(f"{url}?after={tail['next']}").json()["log_tail"]
    assert after == {"text": "bench c=8: done\n", "offset": 29, "next": 45, "skipped": False}


def test_a_bad_log_offset_is_a_400_naming_after(vendor_api, engagement):
    run = _logged_run(engagement, "", 0)
    response = vendor_api.get(reverse("api:run-detail", args=[run.pk]) + "?after=-3")
    assert response.status_code == 400 and response.json()["field"] == "after"


def test_gate_clauses_carry_their_unit_and_comparison(
    vendor_api, actor, vendor_viewer, engagement, host
):
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    cells = [
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "tier": 8,
            "threshold": 25,
            "estimate": 29.6,
            "low": 26.0,
            "high": 33.1,
            "verdict": "pass",
            "cause": "clears",
        },
        {
            "metric": "ttft_p50",
            "compare": "recompute/offload",
            "change": "ratio",
            "tier": 8,
            "threshold": 8.6,
            "estimate": 12.6,
            "low": 11.0,
            "high": 14.0,
            "verdict": "pass",
            "cause": "clears",
        },
        {"check": "gpu_count", "expected": 8, "observed": 8, "verdict": "pass", "cause": "ok"},
    ]
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": cells})
    clauses = vendor_api.get(reverse("api:gate-detail", args=[gate.pk])).json()["clauses"]
    assert [(c["unit"], c["comparison"]) for c in clauses] == [
        ("%", "reduction"),
        ("x", "ratio"),
        ("GPUs", "equals"),
    ]
    assert "observed" not in clauses[2]  # the API's clause shape is unchanged otherwise
