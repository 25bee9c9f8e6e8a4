"""Alert emails through a real SMTP server (aiosmtpd): once per event, to the right people,
retried when the server is down."""

from __future__ import annotations

import socket
from email import message_from_bytes

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from gates import services
from gates.models import Alert, Membership
from runners import tasks
from tests.contract import sign_as_both

pytestmark = pytest.mark.django_db


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((sorted(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.TOLLGATE_ONCALL_EMAILS = ["oncall@vendor.example"]
    yield inbox
    controller.stop()


@pytest.fixture
def failed_gate(
    actor, vendor_viewer, engagement, host, customer_owner, customer_viewer, other_owner
):
    """G1 failed once: the outbox holds one alert."""
    gate = engagement.gates.get(kind="G1")
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clause = {"check": "gpu_count", "verdict": "fail", "cause": "4 observed, 8 expected"}
    services.decision_record(run_id=run.pk, result={"verdict": "fail", "clauses": [clause]})
    return gate


def test_a_failed_gate_mails_its_customer_vendor_staff_and_on_call_once(
    smtp, failed_gate, vendor_admin, customer_viewer
):
    alert = Alert.objects.get(event="gate_failed")
    tasks.deliver_alert(alert.pk)
    tasks.deliver_alert(alert.pk)  # a redelivered message sends nothing more
    tasks.deliver_alerts()
    assert len(smtp.messages) == 1
    recipients, message = smtp.messages[0]
    assert recipients == sorted(
        ["cowner@example.com", "cviewer@example.com", "oncall@vendor.example", "vadmin@example.com"]
    )
    assert "otherowner@example.com" not in recipients  # another customer never hears of it
    assert "G1 failed" in message["Subject"] and "gpu_count" in message.get_payload()
    assert message["Message-ID"].startswith("<alert-")
    alert.refresh_from_db()
    assert alert.delivered_at is not None and alert.attempts == 1


def test_a_member_who_opted_out_gets_nothing(smtp, failed_gate, customer_viewer):
    Membership.objects.filter(user=customer_viewer).update(receives_alerts=False)
    alert = Alert.objects.get(event="gate_failed")
    alert.recipients = services.alert_recipients(alert.engagement)
    alert.save()
    tasks.deliver_alert(alert.pk)
    assert "cviewer@example.com" not in smtp.messages[0][0]


def test_smtp_down_is_retried_later_then_delivered_once(failed_gate, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nobody listens
    alert = Alert.objects.get(event="gate_failed")
    tasks.deliver_alert(alert.pk)
    alert.refresh_from_db()
    assert alert.delivered_at is None and alert.attempts == 1 and alert.last_error
    assert alert.next_attempt_at > timezone.now()
    tasks.deliver_alerts()  # not due yet: no second attempt
    alert.refresh_from_db()
    assert alert.attempts == 1
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=settings.EMAIL_PORT)
    controller.start()
    try:
        Alert.objects.filter(pk=alert.pk).update(next_attempt_at=timezone.now())
        tasks.deliver_alerts()
    finally:
        controller.stop()
    alert.refresh_from_db()
    assert alert.delivered_at is not None and alert.attempts == 2 and len(inbox.messages) == 1


def test_an_event_makes_one_outbox_row_however_often_it_is_raised(failed_gate):
    alert = Alert.objects.get(event="gate_failed")
    again = services.alert_enqueue(
        event="gate_failed",
        key=alert.idempotency_key,
        engagement=alert.engagement,
        subject="dup",
        body="dup",
    )
    assert again.pk == alert.pk and Alert.objects.filter(event="gate_failed").count() == 1
