"""The API tokens page: create with the secret shown once, list, revoke after a confirmation;
for vendor staff and customer owners, within their own organization."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from gates.models import ApiToken, AuditEvent
from tests.gates.pages.test_page_queries import queries_for
from tests.gates.test_tenancy_matrix import make_token

pytestmark = pytest.mark.django_db


def create(client, **fields):
    data = {"name": "nightly CI", "scopes": ["read"], **fields}
    return client.post(reverse("gates:token-list"), data)


def secret_in(page: str) -> str:
    start = page.index('id="new-token"')
    value = page.index('value="', start) + len('value="')
    return page[value : page.index('"', value)]


def test_a_customer_owner_creates_a_token_that_works_against_the_api(
    client, customer_owner, customer_org, engagement
):
    client.force_login(customer_owner)
    response = create(client, organization=customer_org.pk, scopes=["read", "run"])
    page = response.content.decode()
    assert response.status_code == 200 and "shown this once" in page
    assert "no-store" in response["Cache-Control"]
    secret = secret_in(page)
    token = ApiToken.objects.get()
    assert token.organization == customer_org and token.scopes == ["read", "run"]
    assert secret not in client.get(reverse("gates:token-list")).content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    listed = api.get(reverse("api:engagement-list")).json()
    assert [row["id"] for row in listed["results"]] == [engagement.pk]


def test_the_list_shows_scopes_expiry_and_last_use_of_the_own_organization_only(
    client, customer_owner, customer_org, other_owner, other_customer_org
):
    mine = make_token(customer_owner, customer_org, scopes=("read", "sign"))
    theirs = make_token(other_owner, other_customer_org)
    client.force_login(customer_owner)
    page = client.get(reverse("gates:token-list")).content.decode()
    assert f'data-token="{mine.prefix}"' in page and f'data-token="{theirs.prefix}"' not in page
    assert "sign" in page and "never" in page  # no expiry, never used


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"scopes": []}, "scopes: choose at least one scope"),
        ({"name": ""}, "name: This field is required."),
        ({"expires_at": "2001-01-01T00:00"}, "expires_at: the expiry must be in the future"),
        ({"expires_at": "next week"}, "expires_at: Enter a valid date/time."),
    ],
)
def test_bad_input_names_its_field_and_creates_nothing(
    client, customer_owner, customer_org, fields, error
):
    client.force_login(customer_owner)
    response = create(client, organization=customer_org.pk, **fields)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not ApiToken.objects.exists()


def test_another_organizations_engagement_cannot_be_chosen(
    client, customer_owner, customer_org, other_engagement
):
    client.force_login(customer_owner)
    response = create(client, organization=customer_org.pk, engagement=other_engagement.pk)
    assert response.status_code == 400 and "engagement: Select a valid choice" in (
        response.content.decode()
    )
    assert not ApiToken.objects.exists()


def test_revoking_asks_first_and_only_a_post_revokes(client, customer_owner, customer_org):
    token = make_token(customer_owner, customer_org)
    client.force_login(customer_owner)
    url = reverse("gates:token-revoke", args=[token.pk])
    confirm = client.get(url)
    assert confirm.status_code == 200 and "cannot be undone" in confirm.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is None
    response = client.post(url)
    assert response["Location"] == reverse("gates:token-list")
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditEvent.objects.filter(action="token.revoke", actor=customer_owner).exists()


def test_another_organizations_token_is_a_404(
    client, customer_owner, other_owner, other_customer_org
):
    theirs = make_token(other_owner, other_customer_org)
    client.force_login(customer_owner)
    assert client.post(reverse("gates:token-revoke", args=[theirs.pk])).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_a_customer_viewer_is_refused(client, customer_viewer):
    client.force_login(customer_viewer)
    assert client.get(reverse("gates:token-list")).status_code == 403


def test_creating_needs_a_csrf_token(customer_owner, customer_org):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(customer_owner)
    assert create(strict, organization=customer_org.pk).status_code == 403
    assert not ApiToken.objects.exists()


def more_tokens(user, organization, count: int) -> None:
    for _ in range(count):
        make_token(user, organization)


def test_the_tokens_come_in_pages_with_their_count(client, customer_owner, customer_org):
    more_tokens(customer_owner, customer_org, 60)
    client.force_login(customer_owner)
    url = reverse("gates:token-list")
    first = client.get(url).content.decode()
    assert "60 tokens, page 1 of 2." in first and first.count("data-token=") == 50
    last = client.get(url + "?page=2").content.decode()
    assert last.count("data-token=") == 10 and 'rel="prev"' in last and 'rel="next"' not in last
    garbage = client.get(url + "?page=zzz")
    assert garbage.status_code == 200 and garbage.content.decode().count("data-token=") == 50


def test_the_token_list_costs_the_same_queries_with_one_token_or_sixty(
    client, customer_owner, customer_org
):
    more_tokens(customer_owner, customer_org, 1)
    client.force_login(customer_owner)
    url = reverse("gates:token-list")
    client.get(url)  # the session's first read
    few = queries_for(client, url)
    more_tokens(customer_owner, customer_org, 59)
    assert queries_for(client, url) == few
    assert queries_for(client, url + "?page=2") == few


def test_another_organizations_tokens_are_never_counted_or_shown(
    client, customer_owner, customer_org, other_owner, other_customer_org
):
    more_tokens(customer_owner, customer_org, 2)
    theirs = make_token(other_owner, other_customer_org)
    more_tokens(other_owner, other_customer_org, 59)
    client.force_login(customer_owner)
    page = client.get(reverse("gates:token-list")).content.decode()
    assert "2 tokens." in page and page.count("data-token=") == 2
    assert f'data-token="{theirs.prefix}"' not in page
