"""Queries per page, pinned against growth: the engagement list with 500 engagements and the
gate and engagement pages with 50 runs cost what they cost with one (bench/page_speed.py
measures their server time)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from gates.models import Engagement, Gate, Run

pytestmark = pytest.mark.django_db


def more_engagements(template: Engagement, count: int) -> None:
    """`count` copies of the engagement with its four gates, made in bulk (not through the
    service, which would take minutes for 500)."""
    copies = Engagement.objects.bulk_create(
        Engagement(organization_id=template.organization_id, title=f"pilot {n}", model_name="m")
        for n in range(count)
    )
    Gate.objects.bulk_create(
        Gate(engagement=copy, kind=gate.kind, position=gate.position, state=gate.state)
        for copy in copies
        for gate in template.gates.all()
    )


def more_runs(gate: Gate, count: int) -> None:
    now, start = timezone.now(), gate.runs.count() + 1
    Run.objects.bulk_create(
        Run(
            gate=gate,
            spec=gate.current_spec,
            attempt=start + n,
            state=Run.State.FINISHED,
            outcome=Run.Outcome.INFRA_ERROR,
            started_at=now,
            finished_at=now,
            log="probe gpu: ok\n" * 100,
        )
        for n in range(count)
    )


def queries_for(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured)


def test_the_engagement_list_costs_the_same_queries_with_500_engagements(
    client, customer_viewer, engagement
):
    client.force_login(customer_viewer)
    url = reverse("gates:engagement-list")
    client.get(url)  # the session's first read
    few = queries_for(client, url)
    more_engagements(engagement, 499)
    page = client.get(url).content.decode()
    assert page.count('class="next-action"') == 50  # a page of them, with the count of all
    assert "500 engagements, page 1 of 10." in page
    assert queries_for(client, url) == few
    assert queries_for(client, url + "?page=10&state=active") == few
    assert few <= 7  # session, user, memberships, count, engagements with customers, gates


@pytest.mark.parametrize("name", ["gates:gate-detail", "gates:engagement-detail"])
def test_the_gate_and_engagement_pages_cost_the_same_queries_with_50_runs(
    client, vendor_admin, engagement, name
):
    gate = engagement.gates.get(kind="G1")
    more_runs(gate, 1)
    client.force_login(vendor_admin)
    url = reverse(name, args=[gate.pk if name == "gates:gate-detail" else engagement.pk])
    client.get(url)
    few = queries_for(client, url)
    more_runs(gate, 49)
    assert queries_for(client, url) == few


def test_a_gates_runs_come_in_pages_with_their_count_and_a_state_filter(
    client, vendor_admin, engagement
):
    gate = engagement.gates.get(kind="G1")
    more_runs(gate, 120)
    client.force_login(vendor_admin)
    url = reverse("gates:gate-detail", args=[gate.pk])
    first = client.get(url).content.decode()
    assert "120 runs, page 1 of 3." in first and first.count("data-run=") == 50
    last = client.get(url + "?page=3").content.decode()
    assert last.count("data-run=") == 20 and 'rel="prev"' in last and 'rel="next"' not in last
    none = client.get(url + "?run_state=running").content.decode()
    assert "0 runs running." in none and "No runs running." in none
    assert queries_for(client, url + "?page=2") == queries_for(client, url)
