"""Escalation re-sends an unacknowledged critical alert to a wider list until someone
acknowledges it, up to a limit; the signed link acknowledges once, expires, refuses tampering."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing
from django.urls import reverse
from django.utils import timezone

from gates import services
from gates.alerts.links import SALT, ack_token
from gates.alerts.mail import message_id
from gates.models import Alert, AlertSettings, AuditEvent
from worker import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent_failure(smtp, failed_gate, settings):
    settings.TOLLGATE_ESCALATE_AFTER_S = 600
    settings.TOLLGATE_ESCALATION_MAX = 2
    settings.TOLLGATE_ESCALATION_EMAILS = ["duty-manager@vendor.example"]
    AlertSettings.objects.create(
        engagement=failed_gate.engagement, escalation_emails=["cto@northwind.example"]
    )
    alert = Alert.objects.get(event="gate_failed")
    tasks.deliver_alert(alert.pk)
    return alert


def age(alert: Alert, seconds: int) -> None:
    """Pretend the last sending of `alert` happened `seconds` ago."""
    then = timezone.now() - timedelta(seconds=seconds)
    Alert.objects.filter(pk=alert.pk).update(delivered_at=then)
    Alert.objects.filter(parent=alert).update(created_at=then)


def test_an_unacknowledged_failure_escalates_to_the_wider_list_until_the_limit(smtp, sent_failure):
    assert services.alerts_escalate() == []  # not yet due
    age(sent_failure, 601)
    tasks.escalate_alerts()
    tasks.escalate_alerts()  # a beat run twice: still one round
    first = Alert.objects.get(parent=sent_failure, level=1)
    assert {"duty-manager@vendor.example", "cto@northwind.example"} <= set(first.recipients)
    assert set(sent_failure.recipients) <= set(first.recipients)
    tasks.deliver_alert(first.pk)
    recipients, message = smtp.messages[-1]
    assert "duty-manager@vendor.example" in recipients
    unfolded = message["Subject"].replace("\r\n", "")  # a long header is folded
    assert unfolded.startswith("[unacknowledged, 1 of 2] [Tollgate]")
    assert message["In-Reply-To"] == message_id(sent_failure.idempotency_key)
    age(sent_failure, 601)
    services.alerts_escalate()
    age(sent_failure, 601)
    services.alerts_escalate()  # the limit is 2 rounds
    assert sorted(sent_failure.followups.values_list("level", flat=True)) == [1, 2]


def test_acknowledging_stops_the_escalation_and_is_audited(
    smtp, sent_failure, vendor_admin, client
):
    age(sent_failure, 601)
    pending = Alert.objects.get(pk=services.alerts_escalate()[0])
    url = reverse("gates:alert-ack", args=[ack_token(sent_failure.idempotency_key)])
    assert client.get(url).status_code == 200  # a mail scanner's GET acknowledges nothing
    sent_failure.refresh_from_db()
    assert sent_failure.acked_at is None
    response = client.post(url)
    assert response.status_code == 200 and b"Acknowledged" in response.content
    sent_failure.refresh_from_db()
    assert sent_failure.acked_at is not None
    event = AuditEvent.objects.get(action="alert.ack")
    assert event.actor_label == "ack-link" and event.target_id == str(sent_failure.pk)
    sent = len(smtp.messages)
    tasks.deliver_alerts()  # the round queued before the ack is never sent
    assert services.alert_deliver(alert_id=pending.pk) is False
    age(sent_failure, 601)
    assert services.alerts_escalate() == []
    assert len(smtp.messages) == sent


def test_the_link_works_once(sent_failure, client):
    url = reverse("gates:alert-ack", args=[ack_token(sent_failure.idempotency_key)])
    assert client.post(url).status_code == 200
    again = client.post(url)
    assert again.status_code == 400 and b"works once" in again.content
    assert AuditEvent.objects.filter(action="alert.ack").count() == 1


def test_an_expired_link_is_refused(sent_failure, client, settings):
    token = ack_token(sent_failure.idempotency_key)
    settings.TOLLGATE_ACK_LINK_MAX_AGE_S = -1
    response = client.post(reverse("gates:alert-ack", args=[token]))
    assert response.status_code == 400 and b"expired" in response.content
    sent_failure.refresh_from_db()
    assert sent_failure.acked_at is None


@pytest.mark.parametrize("forge", ["flip", "other-key", "other-salt"])
def test_a_tampered_link_is_refused(sent_failure, client, forge):
    token = ack_token(sent_failure.idempotency_key)
    if forge == "flip":
        token = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    elif forge == "other-key":
        payload = signing.TimestampSigner(salt=SALT).sign_object({"k": "x"}, compress=True)
        token = payload.split(":")[0] + token[len(token.split(":")[0]) :]
    else:
        token = signing.TimestampSigner(salt="elsewhere").sign_object(
            {"k": sent_failure.idempotency_key}
        )
    response = client.post(reverse("gates:alert-ack", args=[token]))
    assert response.status_code == 400 and b"not valid" in response.content
    sent_failure.refresh_from_db()
    assert sent_failure.acked_at is None


def test_the_engagement_page_lists_open_alerts_and_acknowledges_them(
    sent_failure, client, vendor_admin, customer_viewer
):
    page = reverse("gates:engagement-detail", args=[sent_failure.engagement_id])
    client.force_login(customer_viewer)
    listed = client.get(page).content.decode()
    assert sent_failure.subject in listed and "Acknowledge</button>" not in listed
    client.force_login(vendor_admin)
    assert "Acknowledge</button>" in client.get(page).content.decode()
    client.post(reverse("gates:alert-ack-here", args=[sent_failure.pk]))
    sent_failure.refresh_from_db()
    assert sent_failure.acked_by == vendor_admin
    assert sent_failure.subject not in client.get(page).content.decode()


def test_another_customer_cannot_acknowledge_from_the_page(sent_failure, client, other_owner):
    client.force_login(other_owner)
    response = client.post(reverse("gates:alert-ack-here", args=[sent_failure.pk]))
    assert response.status_code == 404
