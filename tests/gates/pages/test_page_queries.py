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
    response = client.get(url)
    assert response.content.decode().count('class="next-action"') == 500
    assert queries_for(client, url) == few
    assert few <= 6  # session, user, memberships, engagements with customers, gates


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
