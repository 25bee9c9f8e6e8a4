"""The hosts list: a page of 50 with the count of all, a page number past the end or garbage
answered with a page, the same queries at one host or sixty, and a profile filter."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.models import Host, Profile
from tests.conftest import make_host
from tests.gates.pages.test_page_queries import queries_for

pytestmark = pytest.mark.django_db


def more_hosts(organization, count: int, start: int = 0) -> None:
    """`count` hosts made in bulk (the constraints hold: each has a key, address and user)."""
    template = make_host(organization, name=f"gpu-{start:03}")
    Host.objects.bulk_create(
        Host(
            organization=organization,
            name=f"gpu-{n:03}",
            address=template.address,
            username=template.username,
            host_key=template.host_key,
            profile=template.profile,
        )
        for n in range(start + 1, start + count)
    )


def test_the_hosts_come_in_pages_with_their_count(client, vendor_engineer, customer_org):
    more_hosts(customer_org, 60)
    client.force_login(vendor_engineer)
    url = reverse("gates:host-list")
    first = client.get(url).content.decode()
    assert "60 hosts, page 1 of 2." in first and first.count("data-host=") == 50
    last = client.get(url + "?page=2").content.decode()
    assert last.count("data-host=") == 10 and 'rel="prev"' in last and 'rel="next"' not in last
    past = client.get(url + "?page=99").content.decode()
    assert past.count("data-host=") == 10  # past the end: the last page
    garbage = client.get(url + "?page=zzz")
    assert garbage.status_code == 200 and garbage.content.decode().count("data-host=") == 50


def test_the_host_list_costs_the_same_queries_with_one_host_or_sixty(
    client, vendor_engineer, customer_org
):
    more_hosts(customer_org, 1)
    client.force_login(vendor_engineer)
    url = reverse("gates:host-list")
    client.get(url)  # the session's first read
    few = queries_for(client, url)
    more_hosts(customer_org, 59, start=1)
    assert queries_for(client, url) == few
    assert queries_for(client, url + "?page=2&profile=vllm") == few


def test_the_hosts_filter_by_profile_and_an_unknown_one_lists_none(
    client, vendor_engineer, customer_org
):
    more_hosts(customer_org, 3)
    make_host(customer_org, name="sim-1", profile=Profile.objects.get(name="simhost"))
    client.force_login(vendor_engineer)
    url = reverse("gates:host-list")
    sim = client.get(url + "?profile=simhost").content.decode()
    assert "1 host on simhost." in sim and sim.count("data-host=") == 1
    unknown = client.get(url + "?profile=no-such-profile")
    assert unknown.status_code == 200 and "No hosts on no-such-profile." in unknown.content.decode()


def test_the_host_pager_says_previous_and_next_as_hosts_are_not_ordered_by_time(
    client, vendor_engineer, customer_org
):
    more_hosts(customer_org, 120)
    client.force_login(vendor_engineer)
    page = client.get(reverse("gates:host-list") + "?page=2").content.decode()
    assert 'rel="prev">← Previous</a>' in page and 'rel="next">Next →</a>' in page
    assert "A list not ordered" not in page  # the pager's comment stays out of the page
