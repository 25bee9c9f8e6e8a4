"""The tokens API: created by a session or a `tokens` token (never a read token), shown once,
usable, listed without the secret, revoked, expired; the database never holds the secret."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from gates.models import ApiToken
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db
LIST = reverse("api:token-list")


def session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def create(client, **fields):
    body = {"name": "release-ci", "scopes": ["read", "run"], **fields}
    return client.post(LIST, body, format="json")


def tables_holding(text: str) -> list[str]:
    """Every table with a row whose JSON form contains the text (bytea shows as hex)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
        names = [row[0] for row in cursor.fetchall()]
        holding = []
        for name in names:
            cursor.execute(
                f'SELECT count(*) FROM "{name}" AS t WHERE row_to_json(t)::text LIKE %s',
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                holding.append(name)
    return holding


def test_a_customer_owner_creates_a_token_that_works_and_is_shown_once(customer_owner, engagement):
    owner = session(customer_owner)
    response = create(owner, engagement=engagement.pk)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["token"].startswith(f"tg_{body['prefix']}_")
    assert (body["organization"], body["engagement"]) == ("northwind", engagement.pk)
    use = bearer(body["token"]).get(reverse("api:engagement-detail", args=[engagement.pk]))
    assert use.status_code == 200
    (listed,) = owner.get(LIST).json()["results"]
    assert "token" not in listed and listed["id"] == body["id"]
    assert listed["last_used_at"] is not None and listed["scopes"] == ["read", "run"]


def test_the_database_holds_no_secret_in_clear_even_for_a_replayed_create(vendor_admin):
    admin = session(vendor_admin)
    key = {"HTTP_IDEMPOTENCY_KEY": "mint-1"}
    body = {"name": "ci", "scopes": ["read"]}
    first = admin.post(LIST, body, format="json", **key)
    again = admin.post(LIST, body, format="json", **key)
    assert first.status_code == again.status_code == 201
    assert again.json()["token"] == first.json()["token"] and ApiToken.objects.count() == 1
    random_part = first.json()["token"].rsplit("_", 1)[1]
    assert tables_holding(first.json()["prefix"]), "the search works: the prefix is stored"
    assert tables_holding(random_part) == []


def test_a_revoked_token_is_refused_at_once(vendor_admin, engagement):
    admin = session(vendor_admin)
    made = create(admin).json()
    assert admin.delete(reverse("api:token-detail", args=[made["id"]])).status_code == 204
    refused = bearer(made["token"]).get(reverse("api:engagement-list"))
    assert refused.status_code in (401, 403)
    assert admin.get(LIST).json()["results"][0]["revoked_at"] is not None


def test_a_token_past_its_expiry_is_refused(vendor_admin):
    admin = session(vendor_admin)
    made = create(admin, expires_at=(timezone.now() + timedelta(hours=1)).isoformat()).json()
    assert bearer(made["token"]).get(reverse("api:engagement-list")).status_code == 200
    ApiToken.objects.filter(pk=made["id"]).update(expires_at=timezone.now())
    assert bearer(made["token"]).get(reverse("api:engagement-list")).status_code in (401, 403)


def test_an_expiry_in_the_past_is_a_400_naming_it(vendor_admin):
    response = create(session(vendor_admin), expires_at="2020-01-01T00:00:00Z")
    assert response.status_code == 400 and response.json()["field"] == "expires_at"


@pytest.mark.parametrize("scopes", [["read"], ["read", "run", "sign"]])
def test_a_token_without_the_tokens_scope_cannot_create_or_list_one(
    vendor_admin, vendor_org, scopes
):
    api = token_client(vendor_admin, vendor_org, scopes=scopes)
    assert create(api, scopes=["read"]).status_code == 403
    assert api.get(LIST).status_code == 403
    assert ApiToken.objects.count() == 1


def test_a_tokens_token_mints_only_what_it_holds(customer_owner, customer_org, engagement):
    api = token_client(customer_owner, customer_org, scopes=["tokens", "read"])
    assert create(api, scopes=["read"]).status_code == 201
    wider = create(api, scopes=["read", "run"])
    assert wider.status_code == 403 and "run" in wider.json()["detail"]


def test_a_token_bound_to_an_engagement_mints_only_for_it(
    vendor_admin, vendor_org, engagement, other_engagement
):
    api = token_client(vendor_admin, vendor_org, scopes=["tokens", "read"], engagement=engagement)
    assert create(api, scopes=["read"], engagement=other_engagement.pk).status_code == 400
    assert create(api, scopes=["read"]).status_code == 403
    assert create(api, scopes=["read"], engagement=engagement.pk).status_code == 201


def test_a_customer_viewer_may_not_manage_tokens(customer_viewer):
    assert create(session(customer_viewer), scopes=["read"]).status_code == 403
    assert session(customer_viewer).get(LIST).status_code == 403


def test_each_organization_manages_only_its_own_tokens(
    vendor_engineer, customer_owner, other_owner
):
    mine = create(session(customer_owner)).json()
    assert create(session(vendor_engineer)).status_code == 201
    assert [t["id"] for t in session(customer_owner).get(LIST).json()["results"]] == [mine["id"]]
    assert [t["id"] for t in session(other_owner).get(LIST).json()["results"]] == []
    for outsider in (other_owner, vendor_engineer):
        response = session(outsider).delete(reverse("api:token-detail", args=[mine["id"]]))
        assert response.status_code == 404
    assert ApiToken.objects.get(pk=mine["id"]).revoked_at is None


def test_an_unknown_scope_is_named(vendor_admin):
    response = create(session(vendor_admin), scopes=["admin"])
    assert response.status_code == 400 and response.json()["field"].startswith("scopes")
