"""Every REST list answers a page with its count (gates/api/rest/pagination.py): limit and
offset walk it, the count holds on every page, filters narrow both, and a bad filter is a 400
naming it. Real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from gates import services
from gates.models import Engagement, EvidenceKey, PartyKey
from tests.gates.pages.test_page_queries import queries_for
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org)


def make_engagements(actor, organization, count: int) -> list[int]:
    return [
        services.engagement_create(
            actor=actor, organization=organization, title=f"e{n}", model_name="m"
        ).pk
        for n in range(count)
    ]


def test_the_engagement_list_walks_in_pages_with_the_count_on_each(api, actor, customer_org):
    made = make_engagements(actor, customer_org, 5)
    url = reverse("api:engagement-list")
    first = api.get(url, {"limit": 2}).json()
    assert first["count"] == 5 and len(first["results"]) == 2 and first["previous"] is None
    seen = [row["id"] for row in first["results"]]
    page = first
    while page["next"]:
        page = api.get(page["next"]).json()
        assert page["count"] == 5
        seen += [row["id"] for row in page["results"]]
    assert sorted(seen) == sorted(made) and len(seen) == 5  # newest first, none twice


def test_a_filter_narrows_the_rows_and_the_count(api, actor, customer_org):
    stopped, *_ = make_engagements(actor, customer_org, 3)
    Engagement.objects.filter(pk=stopped).update(state=Engagement.State.STOPPED)
    url = reverse("api:engagement-list")
    page = api.get(url, {"state": "stopped"}).json()
    assert page["count"] == 1 and [row["id"] for row in page["results"]] == [stopped]
    assert api.get(url, {"state": "active"}).json()["count"] == 2
    assert api.get(url, {"organization": customer_org.slug}).json()["count"] == 3
    assert api.get(url, {"organization": "nobody"}).json()["count"] == 0


def test_a_bad_filter_is_a_400_naming_it(api):
    response = api.get(reverse("api:engagement-list"), {"state": "sideways"})
    assert response.status_code == 400 and response.json()["field"] == "state"


def test_a_gates_runs_filter_by_state_and_page(api, actor, vendor_viewer, engagement, host):
    gate = engagement.gates.get(kind="G1")
    for _ in range(2):
        run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
        services.run_mark_canceled(run_id=run.pk, reason="not now")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    url = reverse("api:gate-runs", args=[gate.pk])
    assert api.get(url, {"state": "canceled"}).json()["count"] == 2
    page = api.get(url, {"state": "queued", "limit": 1}).json()
    assert page["count"] == 1 and page["results"][0]["id"] == run.pk and page["next"] is None
    assert api.get(url, {"limit": 1, "offset": 2}).json()["results"][0]["state"] == "canceled"
    assert api.get(url, {"outcome": "nonsense"}).status_code == 400


def test_the_page_size_has_a_ceiling(api, actor, customer_org):
    make_engagements(actor, customer_org, 2)
    page = api.get(reverse("api:engagement-list"), {"limit": 10**9}).json()
    assert page["count"] == 2 and len(page["results"]) == 2


def make_party_keys(user, organization, count: int) -> None:
    PartyKey.objects.bulk_create(
        PartyKey(
            organization=organization,
            user=user,
            public_key=f"ssh-ed25519 AAAA{organization.slug}{n}",
            fingerprint=f"SHA256:{organization.slug}-{uuid.uuid4().hex}",
        )
        for n in range(count)
    )


def make_evidence_keys(count: int) -> None:
    EvidenceKey.objects.bulk_create(
        EvidenceKey(
            fingerprint=f"SHA256:{uuid.uuid4().hex}",
            public_key="ssh-ed25519 AAAA tollgate-evidence",
            public_pem="-----BEGIN PUBLIC KEY-----",
        )
        for _ in range(count)
    )


@pytest.mark.parametrize("name", ["api:party-keys", "api:evidence-keys"])
def test_the_key_lists_walk_in_pages_with_the_count_and_a_bad_limit_is_the_default(
    api, vendor_admin, vendor_org, name
):
    make_party_keys(vendor_admin, vendor_org, 120)
    make_evidence_keys(120)
    url = reverse(name)
    first = api.get(url).json()
    assert first["count"] == 120 and len(first["results"]) == 100 and first["next"]
    last = api.get(url, {"offset": 100}).json()
    assert last["count"] == 120 and len(last["results"]) == 20 and last["next"] is None
    garbage = api.get(url, {"limit": "zzz", "offset": "zzz"})
    assert garbage.status_code == 200 and len(garbage.json()["results"]) == 100


@pytest.mark.parametrize("name", ["api:party-keys", "api:evidence-keys"])
def test_the_key_lists_cost_the_same_queries_with_one_key_or_sixty(
    api, vendor_admin, vendor_org, name
):
    make_party_keys(vendor_admin, vendor_org, 1)
    make_evidence_keys(1)
    url = reverse(name)
    api.get(url)  # the token's first use records it
    few = queries_for(api, url)
    make_party_keys(vendor_admin, vendor_org, 59)
    make_evidence_keys(59)
    assert queries_for(api, url) == few
    assert queries_for(api, url + "?offset=50") == few


def test_another_organizations_signing_keys_are_never_counted_or_listed(
    customer_owner, customer_org, other_owner, other_customer_org
):
    make_party_keys(customer_owner, customer_org, 2)
    make_party_keys(other_owner, other_customer_org, 60)
    page = token_client(customer_owner, customer_org).get(reverse("api:party-keys")).json()
    assert page["count"] == 2 and len(page["results"]) == 2
    assert all(row["user"] == customer_owner.username for row in page["results"])
