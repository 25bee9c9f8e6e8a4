"""The public library as an anonymous reader sees it: every URL it links to, and every URL of
every publication and claim whatever its state. Nothing unpublished is reachable, a withdrawn
report says so at its URL, identifying names never appear, and the pages are rate-limited."""

from __future__ import annotations

import json
import re
import uuid
from collections import deque

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import reverse

from gates.evidence import publication as publishing
from gates.models import Publication
from gates.services.claims import claim_create
from tests.gates.pages.test_page_queries import queries_for

pytestmark = pytest.mark.django_db

LINK = re.compile(r'(?:href|src)="(/[^"#]*)"')


@pytest.fixture(autouse=True)
def fresh_limits():
    caches["default"].clear()  # this worktree's own cache database (CACHE_URL)


def publication_urls(slug: str) -> dict[str, str]:
    return {
        "report": reverse("gates:library-report", args=[slug]),
        "pdf": reverse("gates:library-pdf", args=[slug]),
        "bundle": reverse("gates:library-bundle", args=[slug]),
    }


def walk(client: Client, start: str) -> dict[str, int]:
    """Every same-site URL reachable from `start` by links, with its status (not followed out
    of /library/: a page elsewhere is only fetched, to see it is closed)."""
    seen: dict[str, int] = {}
    queue = deque([start])
    while queue:
        url = queue.popleft()
        if url in seen:
            continue
        response = client.get(url)
        seen[url] = response.status_code
        if url.startswith("/library/") and response.get("Content-Type", "").startswith("text/html"):
            queue.extend(LINK.findall(response.content.decode()))
    return seen


def test_only_what_the_customer_approved_is_reachable_by_an_anonymous_reader(
    proposed, owner_actor, owner_viewer, actor, vendor_viewer, customer_org, customer_owner
):
    anonymous = Client()
    for url in publication_urls(proposed.slug).values():
        assert anonymous.get(url).status_code == 404, url  # proposed, not approved
    assert proposed.slug not in anonymous.get(reverse("gates:library")).content.decode()

    published = publishing.publication_approve(
        actor=owner_actor, viewer=owner_viewer, publication=proposed, naming="anonymous"
    )
    claim = claim_create(
        actor=actor,
        viewer=vendor_viewer,
        text="TTFT p50 reduction 30 % at c=8",
        publications=[published],
    )
    reached = walk(anonymous, reverse("gates:library"))
    for url in publication_urls(published.slug).values():
        assert reached.get(url) == 200, (url, reached)
    assert reached[reverse("gates:library-claim", args=[claim.slug])] == 200
    closed = {u: s for u, s in reached.items() if not u.startswith(("/library/", "/static/"))}
    assert all(status in (302, 404) for status in closed.values()), closed

    publishing.publication_withdraw(
        actor=owner_actor, viewer=owner_viewer, publication=published, reason="no longer"
    )
    again = publishing.publication_propose(
        actor=actor, viewer=vendor_viewer, decision=published.decision
    )
    urls = publication_urls(published.slug)
    tombstone = anonymous.get(urls["report"])
    assert tombstone.status_code == 200 and "Withdrawn" in tombstone.content.decode()
    assert "no longer" in tombstone.content.decode()
    assert anonymous.get(urls["pdf"]).status_code == 404
    assert anonymous.get(urls["bundle"]).status_code == 404
    for url in publication_urls(again.slug).values():
        assert anonymous.get(url).status_code == 404, url
    reached = walk(anonymous, reverse("gates:library"))
    assert not any(again.slug in url for url in reached)
    assert all(status != 200 or not url.endswith(".zip") for url, status in reached.items())

    secrets = (customer_org.name, customer_org.slug, customer_owner.username, "gpu-1", "10.0.0.5")
    for url, status in reached.items():
        if status == 200 and url.startswith("/library/"):
            body = anonymous.get(url).content.decode(errors="replace").lower()
            assert not [s for s in secrets if s.lower() in body], url


def test_a_claim_s_badge_and_feed_follow_the_reports_live(
    published, actor, vendor_viewer, owner_actor, owner_viewer
):
    estimate = published.record["clauses"][0]["estimate"]
    claim = claim_create(
        actor=actor,
        viewer=vendor_viewer,
        text=f"TTFT p50 reduction {estimate - 5:.0f} % at c=8",
        publications=[published],
    )
    anonymous = Client()
    feed = anonymous.get(reverse("gates:library-feed", args=[claim.slug]))
    assert feed["Access-Control-Allow-Origin"] == "*"
    assert json.loads(feed.content)["status"] == "supported"
    badge = anonymous.get(reverse("gates:library-badge", args=[claim.slug]))
    assert badge["Content-Type"] == "image/svg+xml" and b"supported" in badge.content

    publishing.publication_withdraw(actor=owner_actor, viewer=owner_viewer, publication=published)
    document = json.loads(anonymous.get(reverse("gates:library-feed", args=[claim.slug])).content)
    assert document["status"] == "not supported"
    assert document["reports"][0]["state"] == "withdrawn"


def test_a_claim_cites_only_published_reports(proposed, actor, vendor_viewer):
    from gates.errors import ServiceError

    with pytest.raises(ServiceError, match="published reports"):
        claim_create(
            actor=actor, viewer=vendor_viewer, text="30 % lower TTFT", publications=[proposed]
        )


def _address_of_its_own() -> str:
    """An IPv6 documentation address no other test uses."""
    digits = uuid.uuid4().hex
    return f"2001:db8::{digits[:4]}:{digits[4:8]}"


def test_the_public_pages_are_rate_limited_per_address(settings, published):
    settings.TOLLGATE_LIBRARY_RATE = 3
    # The limit's counter lives in the cache every pytest worker shares, and other tests read the
    # library from 127.0.0.1 too: this test's client comes from an address of its own.
    anonymous = Client(REMOTE_ADDR=_address_of_its_own())
    url = reverse("gates:library-report", args=[published.slug])
    assert [anonymous.get(url).status_code for _ in range(3)] == [200, 200, 200]
    refused = anonymous.get(reverse("gates:library"))
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    other = Client(REMOTE_ADDR=_address_of_its_own())
    assert other.get(url).status_code == 200


def test_the_report_shows_clauses_the_verify_command_and_both_consents(published):
    page = Client().get(reverse("gates:library-report", args=[published.slug])).content.decode()
    assert f"bin/tollgate-verify tollgate-library-{published.slug}.zip --public-key" in page
    assert "a cloud provider" in page and "ttft_p50" in page
    assert page.count("</details>") == 2  # the vendor's proposal and the customer's approval
    assert Publication.objects.get().state == "published"


def more_publications(template: Publication, count: int, *, published: bool = True) -> None:
    """`count` copies of a publication in bulk, each with its own slug; unpublished ones are
    only proposed."""
    Publication.objects.bulk_create(
        Publication(
            decision_id=template.decision_id,
            state=template.state if published else Publication.State.PROPOSED,
            record=template.record,
            published_at=template.published_at if published else None,
        )
        for _ in range(count)
    )


def report_rows(page: str) -> int:
    return page.count('<tr><td><a href="/library/reports/')


def test_the_index_lists_the_reports_in_pages_with_their_count(published):
    more_publications(published, 59)
    anonymous, url = Client(), reverse("gates:library")
    first = anonymous.get(url).content.decode()
    assert "60 reports, page 1 of 2." in first and report_rows(first) == 50
    last = anonymous.get(url + "?page=2").content.decode()
    assert report_rows(last) == 10 and 'rel="prev"' in last and 'rel="next"' not in last
    garbage = anonymous.get(url + "?page=zzz")
    assert garbage.status_code == 200 and report_rows(garbage.content.decode()) == 50
    assert report_rows(anonymous.get(url + "?page=99").content.decode()) == 10


def test_the_index_costs_the_same_queries_with_one_report_or_sixty(published):
    anonymous, url = Client(), reverse("gates:library")
    few = queries_for(anonymous, url)
    more_publications(published, 59)
    assert queries_for(anonymous, url) == few
    assert queries_for(anonymous, url + "?page=2") == few


def test_unapproved_reports_are_never_counted_or_shown_on_the_index(published):
    more_publications(published, 60, published=False)
    page = Client().get(reverse("gates:library")).content.decode()
    assert "1 report." in page and report_rows(page) == 1
