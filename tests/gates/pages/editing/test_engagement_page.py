"""The new engagement page: vendor staff create one with its four gates and the service's audit
entry; customers are refused as the API refuses them; each refusal stands on its field; a
customer the viewer may not choose is never offered."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.models import AuditEvent, Engagement

pytestmark = pytest.mark.django_db

URL = "/engagements/new/"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def fields(organization, **overrides) -> dict:
    return {
        "organization": organization.pk,
        "title": "Qwen3 offload trial",
        "model_name": "Qwen/Qwen3-Coder-480B",
        "platform": "8x MI300X, TP8",
        "planned_start": "2026-09-01",
        **overrides,
    }


def test_the_route_is_where_the_list_links_it(client, vendor_engineer):
    client.force_login(vendor_engineer)
    assert reverse("gates:engagement-new") == URL
    listing = client.get(reverse("gates:engagement-list")).content.decode()
    assert f'href="{URL}"' in listing


def test_a_vendor_engineer_creates_an_engagement_from_the_page(
    client, vendor_engineer, customer_org
):
    client.force_login(vendor_engineer)
    form = client.get(URL)
    assert form.status_code == 200 and b"csrfmiddlewaretoken" in form.content
    response = client.post(URL, fields(customer_org))
    engagement = Engagement.objects.get(title="Qwen3 offload trial")
    assert response.status_code == 302
    assert response["Location"] == reverse("gates:engagement-detail", args=[engagement.pk])
    assert engagement.organization == customer_org
    assert engagement.model_name == "Qwen/Qwen3-Coder-480B"
    assert str(engagement.planned_start) == "2026-09-01"
    assert [g.kind for g in engagement.gates.order_by("position")] == ["G1", "G2", "G3", "G4"]
    event = AuditEvent.objects.get(action="engagement.create")
    assert event.actor == vendor_engineer and event.detail == {"title": "Qwen3 offload trial"}


@pytest.mark.parametrize("role", ["customer_owner", "customer_viewer"])
def test_customers_are_refused_as_the_api_refuses_them(client, request, role, customer_org):
    client.force_login(request.getfixturevalue(role))
    assert client.get(URL).status_code == 403
    assert client.post(URL, fields(customer_org)).status_code == 403
    assert not Engagement.objects.exists()
    listing = client.get(reverse("gates:engagement-list")).content.decode()
    assert URL not in listing


def test_each_refusal_is_shown_on_its_field_and_nothing_is_created(
    client, vendor_engineer, customer_org
):
    client.force_login(vendor_engineer)
    response = client.post(URL, fields(customer_org, title="   ", planned_start="soon"))
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-field="title"' in page and "title: This field is required." in page
    assert "planned_start: Enter a valid date." in page
    assert not Engagement.objects.exists()


def test_only_customer_organizations_are_offered(
    client, vendor_engineer, vendor_org, customer_org, other_customer_org
):
    client.force_login(vendor_engineer)
    page = client.get(URL).content.decode()
    assert customer_org.name in page and other_customer_org.name in page
    assert f'value="{vendor_org.pk}"' not in page
    response = client.post(URL, fields(vendor_org))
    assert response.status_code == 400
    assert "organization: Select a valid choice." in response.content.decode()
    assert not Engagement.objects.exists()
