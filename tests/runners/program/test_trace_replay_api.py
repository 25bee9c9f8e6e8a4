"""G3 on the customer's trace through the public surfaces only: the trace uploaded and read back
through the REST API, the spec naming its digest put and signed by both parties there, the run
started there, and its verdict, per-cell fidelity and hit bands read back from the API and the
run page. The gates the test is not about (G1, G2) go through the services, as their own tests'."""

from __future__ import annotations

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gates.demo.trace import fitting_trace
from tests.gates.test_tenancy import token_client
from tests.runners.program.test_gate_programs import drive, pass_gate, start, tasks_run_here
from tests.runners.program.test_trace_replay_g3 import KV_PLAN, trace_spec
from tests.runners.program.trace_replays import sim_host
from tests.simhosts import g1_spec
from worker import tasks

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
__all__ = ["sim_host", "tasks_run_here"]
CHARACTERISED_WITHIN_S = 120


@pytest.fixture
def customer_api(customer_owner, customer_org):
    # Signing by token needs its own scope: a CI token that runs gates cannot sign contracts.
    return token_client(customer_owner, customer_org, scopes=["read", "run", "sign"])


@pytest.fixture
def vendor_api(vendor_admin):
    vendor = vendor_admin.memberships.get().organization
    return token_client(vendor_admin, vendor, ["read", "run", "sign"])


def upload(api, engagement) -> dict:
    """POST the shipped Mooncake fixture (less what simhost cannot take) as the customer."""
    body = {"file": SimpleUploadedFile("mooncake.jsonl", fitting_trace()), "format": "mooncake"}
    url = reverse("api:engagement-traces", args=[engagement.pk])
    response = api.post(url, body, format="multipart")
    assert response.status_code == 201, response.json()
    return response.json()


def characterised(api, trace_id: int) -> dict:
    """Poll the trace detail until it is ready; this process is the worker its poke reaches."""
    url = reverse("api:trace-detail", args=[trace_id])
    deadline = time.monotonic() + CHARACTERISED_WITHIN_S
    while time.monotonic() < deadline:
        body = api.get(url).json()
        if body["state"] == "ready":
            return body
        assert body["state"] == "characterizing", body
        tasks.characterize_trace(trace_id)
    raise AssertionError(f"trace {trace_id} not characterised within {CHARACTERISED_WITHIN_S} s")


def signed_by_both(vendor_api, customer_api, gate, document: dict) -> dict:
    """PUT the spec as the vendor, then both parties sign the version and digest they read."""
    put = vendor_api.put(reverse("api:gate-spec", args=[gate.pk]), document, format="json")
    assert put.status_code == 201, put.json()
    version = {"version": put.json()["version"], "digest": put.json()["digest"]}
    for api in (vendor_api, customer_api):
        signed = api.post(reverse("api:gate-spec-sign", args=[gate.pk]), version, format="json")
        assert signed.status_code == 200, signed.json()
    assert signed.json()["signed_by_both"], signed.json()
    return signed.json()


def test_a_customer_runs_g3_on_their_trace_through_the_api_and_reads_its_fidelity(
    client, actor, vendor_viewer, engagement, sim_host, customer_api, vendor_api, customer_viewer
):
    uploaded = upload(customer_api, engagement)
    trace = characterised(customer_api, uploaded["id"])
    assert trace["profile"]["requests"] == uploaded["requests"] > 0
    # A real G1, so the planner knows the GPUs, and the KV plan the replay's bands are read on.
    g1 = drive(start(actor, vendor_viewer, engagement, "G1", sim_host, g1_spec()))
    assert g1.gate.decisions.first().verdict == "pass", g1.log
    type(engagement).objects.filter(pk=engagement.pk).update(kv_plan=KV_PLAN)
    pass_gate(actor, vendor_viewer, engagement, "G2", sim_host)

    gate = engagement.gates.get(kind="G3")
    document = trace_spec(uploaded["spec_reference"]["sha256"])
    spec = signed_by_both(vendor_api, customer_api, gate, document)
    assert spec["document"]["workload"]["trace"]["sha256"] == trace["sha256"]
    started = customer_api.post(
        reverse("api:gate-runs", args=[gate.pk]), {"host": sim_host.name}, format="json"
    )
    assert started.status_code == 202, started.json()
    run = drive(gate.runs.get(pk=started.json()["id"]))

    read = customer_api.get(reverse("api:run-detail", args=[run.pk])).json()
    assert read["outcome"] == "completed", run.log
    decided = customer_api.get(reverse("api:gate-detail", args=[gate.pk])).json()
    latest = decided["latest_decision"]
    assert latest["verdict"] in ("pass", "fail", "inconclusive"), latest
    assert latest["spec_version"] == spec["version"] and not latest["rehearsal"]
    fidelity = latest["replay_fidelity"]
    assert fidelity["reasons"] == [] and len(fidelity["cells"]) == 12, fidelity
    assert all(cell["valid"] for cell in fidelity["cells"]), fidelity["cells"]
    (band,) = fidelity["hit_bands"]
    caching = [cell for cell in fidelity["cells"] if not cell["cell"].startswith("recompute")]
    assert caching and all(cell["hit_rate"]["band"] == band[1] for cell in caching)
    measured = customer_api.get(reverse("api:run-measurements", args=[run.pk])).json()["results"]
    assert len(measured) == 12
    assert all(row["metrics"]["replay"]["fidelity"]["valid"] for row in measured)

    client.force_login(customer_viewer)
    html = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    section = html[html.index('id="run-replay-fidelity"') :]
    assert section.count("faithful</span>") == 12
    for plot in ("ttft", "ecdf", "arrival"):
        assert f'data-figure="figure-requests-c256-{plot}"' in html, plot
