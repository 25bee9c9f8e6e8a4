"""Account: password change, password reset by email, login throttling on the login page
(django-axes), and the idle session timeout."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.contrib.sessions.models import Session
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from gates.idle_session import TOUCHED_AT

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "violet-harbour-92-lantern"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def owner(customer_owner):
    customer_owner.set_password("a-long-test-password")
    customer_owner.save()
    return customer_owner


def log_in(client, password: str, username: str = "cowner"):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_a_signed_in_user_changes_their_password(client, owner):
    client.force_login(owner)
    form = client.get(reverse("password_change"))
    assert form.status_code == 200 and "Change your password" in form.content.decode()
    response = client.post(
        reverse("password_change"),
        {
            "old_password": "a-long-test-password",
            "new_password1": NEW_PASSWORD,
            "new_password2": NEW_PASSWORD,
        },
    )
    assert response["Location"] == reverse("password_change_done")
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)


def test_a_wrong_old_password_is_named_on_its_field(client, owner):
    client.force_login(owner)
    response = client.post(
        reverse("password_change"),
        {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert "old_password: Your old password was entered incorrectly" in response.content.decode()


def test_a_reset_link_arrives_by_email_and_sets_a_new_password(client, owner):
    response = client.post(reverse("password_reset"), {"email": owner.email})
    assert response["Location"] == reverse("password_reset_done")
    (message,) = mail.outbox
    assert message.to == [owner.email] and "reset your password" in message.subject
    link = re.search(r"https?://[^/\s]+(/account/reset/\S+/)", message.body).group(1)
    form = client.get(link, follow=True)  # Django swaps the token for a session-held one
    assert "Set a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert done["Location"] == reverse("password_reset_complete")
    assert log_in(client, NEW_PASSWORD)["Location"] == reverse("gates:engagement-list")
    assert "no longer works" in client.get(link, follow=True).content.decode()  # used once


def test_an_unknown_address_gets_the_same_answer_and_no_email(client, owner):
    response = client.post(reverse("password_reset"), {"email": "nobody@example.com"})
    assert response["Location"] == reverse("password_reset_done") and not mail.outbox


def test_the_login_page_locks_out_after_repeated_failures(client, owner, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        assert log_in(client, "wrong").status_code == 200
    assert log_in(client, "wrong").status_code == 429
    # Locked out: even the right password is refused until the cool-off ends.
    assert log_in(client, "a-long-test-password").status_code == 429


def test_an_idle_session_is_extended_by_each_request_and_ends_when_left_alone(client, owner):
    assert not django_settings.SESSION_SAVE_EVERY_REQUEST  # pushed once a minute, not per request
    client.force_login(owner)
    key = client.session.session_key
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() + timedelta(60))
    client.get(reverse("gates:engagement-list"))
    expiry = Session.objects.get(session_key=key).expire_date
    age = timedelta(seconds=django_settings.SESSION_COOKIE_AGE)
    assert abs(expiry - (timezone.now() + age)) < timedelta(minutes=1)  # pushed on, not kept
    # Within SESSION_TOUCH_S another request writes nothing; after it, the expiry moves again.
    Session.objects.filter(session_key=key).update(expire_date=expiry - timedelta(seconds=30))
    client.get(reverse("gates:engagement-list"))
    assert Session.objects.get(session_key=key).expire_date == expiry - timedelta(seconds=30)
    session = client.session
    session[TOUCHED_AT] -= django_settings.SESSION_TOUCH_S
    session.save()
    Session.objects.filter(session_key=key).update(expire_date=expiry - timedelta(seconds=30))
    client.get(reverse("gates:engagement-list"))
    later = Session.objects.get(session_key=key).expire_date
    assert abs(later - (timezone.now() + age)) < timedelta(minutes=1)
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(1))
    response = client.get(reverse("gates:engagement-list"))
    assert response.status_code == 302 and "/login/" in response["Location"]
