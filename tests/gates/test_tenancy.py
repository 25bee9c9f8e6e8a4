"""Customers never see another organization's data: pages and API answer 404. Every route's
404 for another organization's object is asserted by the generated test_tenancy_matrix.py."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from gates import services
from gates.models import Engagement, Run
from gates.tenancy import viewer_for_user, visible
from tests.conftest import make_host

pytestmark = pytest.mark.django_db


@pytest.fixture
def foreign_run(actor, vendor_viewer, other_engagement, other_customer_org):
    host = make_host(other_customer_org, name="contoso-gpu")
    return services.run_create(
        actor=actor, viewer=vendor_viewer, gate=other_engagement.gates.get(kind="G1"), host=host
    )


def token_client(user, organization, scopes=("read",), engagement=None) -> APIClient:
    _, secret = services.api_token_create(
        actor=services.Actor(user=user),
        viewer=viewer_for_user(user),
        organization=organization,
        name="ci",
        scopes=list(scopes),
        engagement=engagement,
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_a_customer_sees_only_its_own_engagements(customer_owner, engagement, other_engagement):
    viewer = viewer_for_user(customer_owner)
    assert list(visible(Engagement, viewer)) == [engagement]


def test_vendor_staff_see_every_organization(vendor_engineer, engagement, other_engagement):
    assert set(visible(Engagement, viewer_for_user(vendor_engineer))) == {
        engagement,
        other_engagement,
    }


def test_posting_to_a_foreign_gate_is_a_404_and_starts_nothing(
    customer_owner, customer_org, other_engagement, foreign_run
):
    api = token_client(customer_owner, customer_org, scopes=["run"])
    gate = other_engagement.gates.get(kind="G2")
    response = api.post(
        reverse("api:gate-runs", args=[gate.pk]), {"host": "contoso-gpu"}, format="json"
    )
    assert response.status_code == 404
    assert Run.objects.count() == 1


def test_lists_never_include_foreign_rows(
    customer_owner, customer_org, engagement, other_engagement
):
    api = token_client(customer_owner, customer_org)
    ids = [row["id"] for row in api.get(reverse("api:engagement-list")).json()["results"]]
    assert ids == [engagement.pk]


def test_a_token_bound_to_one_engagement_sees_only_it(
    vendor_admin, vendor_org, engagement, other_engagement
):
    api = token_client(vendor_admin, vendor_org, engagement=engagement)
    ids = [row["id"] for row in api.get(reverse("api:engagement-list")).json()["results"]]
    assert ids == [engagement.pk]
    assert api.get(reverse("api:engagement-detail", args=[other_engagement.pk])).status_code == 404


def test_hosts_are_hidden_from_customers(customer_owner, customer_org, host):
    api = token_client(customer_owner, customer_org)
    response = api.get(reverse("api:host-list"))
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
