"""Rate limits on guessing (issue 12 item 5): wrong passwords at the login page (django-axes)
and failed bearer tokens (gates.api.rest.throttling), each refused with a 429 past the limit and
audited."""

from __future__ import annotations

import itertools
import uuid

import pytest
from axes.models import AccessAttempt
from django.urls import reverse
from rest_framework.test import APIClient

from gates.models import AuditEvent
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db
# Documentation addresses, new in every session: the token limit's counts live in the cache,
# which outlives a test session.
_SESSION = uuid.uuid4().hex
_addresses = (f"2001:db8::{_SESSION[:4]}:{_SESSION[4:8]}:{n:x}" for n in itertools.count(1))


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Forty logins with the real PBKDF2 cost take seconds; the limits do not depend on it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def address() -> str:
    """A client address of its own, so no other test's failures count."""
    return next(_addresses)


def login(client, address: str, password: str):
    return client.post(
        reverse("login"), {"username": "vadmin", "password": password}, REMOTE_ADDR=address
    )


def test_the_eleventh_wrong_password_is_refused_with_a_429_and_audited(
    client, vendor_admin, address
):
    for attempt in range(10):
        response = login(client, address, f"wrong-{attempt}")
        assert response.status_code == 200, attempt  # the form again, with its error
    assert login(client, address, "wrong-10").status_code == 429
    # Locked out: the right password is refused too, until the cool-off ends.
    assert login(client, address, "a-long-test-password").status_code == 429
    event = AuditEvent.objects.filter(action="login.locked_out").first()
    assert event is not None and event.detail == {"username": "vadmin", "ip": address}
    assert AccessAttempt.objects.get(username="vadmin").failures_since_start >= 11


def test_the_lockout_holds_one_user_at_one_address(client, vendor_admin, address):
    for attempt in range(11):
        login(client, address, f"wrong-{attempt}")
    response = login(client, next(_addresses), "a-long-test-password")
    assert response.status_code == 302  # the same user from elsewhere still logs in


def test_a_right_password_before_the_limit_resets_the_count(client, vendor_admin, address):
    for attempt in range(9):
        login(client, address, f"wrong-{attempt}")
    assert login(client, address, "a-long-test-password").status_code == 302
    client.logout()
    for attempt in range(10):
        assert login(client, address, f"again-{attempt}").status_code == 200


def test_failed_tokens_past_the_limit_are_429s_even_with_a_good_token_then(
    vendor_admin, vendor_org, address, settings
):
    settings.TOLLGATE_TOKEN_FAILURES_ALLOWED = 5
    url = reverse("api:engagement-list")
    guesser = APIClient(REMOTE_ADDR=address)
    for attempt in range(5):
        guesser.credentials(HTTP_AUTHORIZATION=f"Bearer tg_guess{attempt}_nothing")
        assert guesser.get(url).status_code == 401, attempt
    assert guesser.get(url).status_code == 429
    good = token_client(vendor_admin, vendor_org)
    assert good.get(url, REMOTE_ADDR=address).status_code == 429
    assert good.get(url, REMOTE_ADDR=next(_addresses)).status_code == 200
    events = AuditEvent.objects.filter(action="token.failures_limited")
    assert [e.detail["ip"] for e in events] == [address]
