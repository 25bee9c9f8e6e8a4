"""Shared fixtures: organizations, people with each role, an engagement, hosts, tokens."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from gates import cache, services
from gates.models import Host, Membership, Organization, Profile
from gates.tenancy import viewer_for_user


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After every test that touched the database: each gate's stored readout is what its
    specs, signatures and decisions say now. A write path that forgets to refresh it fails
    here, in whichever test first takes that path."""
    result = yield
    if _uses_database(item):
        _assert_readouts_current()
    return result


def _uses_database(item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & {"db", "transactional_db", "live_server"}) or bool(
        item.get_closest_marker("django_db")
    )


def _assert_readouts_current() -> None:
    from gates.models import Gate
    from gates.selectors import gates_with_latest, readout_of

    for gate in gates_with_latest(Gate.objects.exclude(readout=None)):
        assert gate.readout == readout_of(gate), f"gate {gate.pk}'s stored readout is stale"


@pytest.fixture(autouse=True)
def cache_outage_forgotten(monkeypatch):
    """A test that broke the cache leaves no outage behind (gates.cache skips the cache for
    seconds after a failure and warns once per outage)."""
    monkeypatch.setattr(cache, "_OUTAGE", cache.CacheOutage())


# An OpenSSH public key line (any valid blob will do; it is only pinned, not used here).
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.fixture
def vendor_org(db) -> Organization:
    return Organization.objects.create(name="Acme KV", slug="acme", kind="vendor")


@pytest.fixture
def customer_org(db) -> Organization:
    return Organization.objects.create(name="Northwind", slug="northwind", kind="customer")


@pytest.fixture
def other_customer_org(db) -> Organization:
    return Organization.objects.create(name="Contoso", slug="contoso", kind="customer")


def make_user(username: str, organization: Organization, role: str):
    user = get_user_model().objects.create_user(
        username=username, password="a-long-test-password", email=f"{username}@example.com"
    )
    Membership.objects.create(user=user, organization=organization, role=role)
    return user


@pytest.fixture
def vendor_admin(vendor_org):
    return make_user("vadmin", vendor_org, Membership.Role.VENDOR_ADMIN)


@pytest.fixture
def vendor_engineer(vendor_org):
    return make_user("vengineer", vendor_org, Membership.Role.VENDOR_ENGINEER)


@pytest.fixture
def customer_owner(customer_org):
    return make_user("cowner", customer_org, Membership.Role.CUSTOMER_OWNER)


@pytest.fixture
def customer_viewer(customer_org):
    return make_user("cviewer", customer_org, Membership.Role.CUSTOMER_VIEWER)


@pytest.fixture
def other_owner(other_customer_org):
    return make_user("otherowner", other_customer_org, Membership.Role.CUSTOMER_OWNER)


@pytest.fixture
def actor(vendor_admin) -> services.Actor:
    return services.Actor(user=vendor_admin, label="test")


@pytest.fixture
def vendor_viewer(vendor_admin):
    return viewer_for_user(vendor_admin)


@pytest.fixture
def engagement(actor, customer_org):
    return services.engagement_create(
        actor=actor, organization=customer_org, title="480B long context", model_name="m"
    )


@pytest.fixture
def other_engagement(actor, other_customer_org):
    return services.engagement_create(
        actor=actor, organization=other_customer_org, title="Contoso chat", model_name="m"
    )


def make_host(organization: Organization, name: str = "gpu-1", **overrides) -> Host:
    values = {
        "organization": organization,
        "name": name,
        "transport": "ssh",
        "address": "10.0.0.5",
        "username": "bench",
        "host_key": HOST_KEY,
        "profile": Profile.objects.get(name="vllm"),
        "key_file_path": "/etc/tollgate/key",
    }
    values.update(overrides)
    return Host.objects.create(**values)


@pytest.fixture
def host(customer_org) -> Host:
    return make_host(customer_org)
