"""Queries per request on the API's hot read, pinned (bench/api_speed.py measures its speed):
a CI client polls GET /api/v1/gates/{id}/ for hours, so a query added here costs every poll."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates import services
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db

# The token; the creator's memberships with their organizations; the gate row, whose readout
# holds its spec version, the version in force and the latest engine decision (stored when one
# of them is created). last_used_at is written at most once a minute, not per request.
GATE_DETAIL_QUERIES = 3


def decide(actor, viewer, gate, host, cells: int) -> None:
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clauses = [{"check": f"check_{index}", "verdict": "pass"} for index in range(cells)]
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": clauses})


@pytest.mark.parametrize("cells", [0, 1, 40])
def test_a_gate_read_by_token_costs_a_fixed_number_of_queries(
    django_assert_num_queries,
    vendor_admin,
    vendor_org,
    actor,
    vendor_viewer,
    engagement,
    host,
    cells,
):
    gate = engagement.gates.get(kind="G1")
    if cells:
        decide(actor, vendor_viewer, gate, host, cells)
    api = token_client(vendor_admin, vendor_org)
    url = reverse("api:gate-detail", args=[gate.pk])
    assert api.get(url).status_code == 200  # the first use also stamps last_used_at
    with django_assert_num_queries(GATE_DETAIL_QUERIES):
        response = api.get(url)
    assert response.status_code == 200 and len(response.json()["clauses"]) == cells


def test_a_gates_run_list_costs_a_fixed_number_of_queries_and_carries_no_logs(
    django_assert_num_queries, vendor_admin, vendor_org, actor, vendor_viewer, engagement, host
):
    gate = engagement.gates.get(kind="G1")
    for _ in range(3):
        decide(actor, vendor_viewer, gate, host, cells=1)
    api = token_client(vendor_admin, vendor_org)
    url = reverse("api:gate-runs", args=[gate.pk])
    assert api.get(url).status_code == 200
    # The token; the memberships; the gate; the count; its runs with spec, host and soak joined.
    with django_assert_num_queries(5):
        runs = api.get(url).json()["results"]
    assert len(runs) == 3 and all("log_tail" not in run for run in runs)
    one = api.get(reverse("api:run-detail", args=[runs[0]["id"]])).json()
    assert "text" in one["log_tail"]
