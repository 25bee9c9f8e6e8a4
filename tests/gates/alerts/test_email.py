"""Alert emails through a real SMTP server (aiosmtpd): once per event, to the right people,
with a text and an HTML part, retried when the server is down, one Message-ID per event."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from gates import services
from gates.alerts.mail import message_id
from gates.models import Alert, AlertPreference, AlertSettings, Membership
from tests.celeryproc import ROOT, process_environment
from tests.gates.alerts.conftest import Inbox, fail_gate, free_port, text_and_html
from tests.sshd import wait_for
from worker import tasks

pytestmark = pytest.mark.django_db


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
    assert message["Subject"] == "[Tollgate] 480B long context: G1 failed (attempt 1 of 2)"
    assert message["Message-ID"] == message_id(alert.idempotency_key)
    text, html = text_and_html(message)
    for part in (text, html):
        assert "gpu_count" in part and "4 observed, 8 expected" in part
        assert f"/gates/{failed_gate.pk}/" in part
        run = failed_gate.runs.get()
        assert f"/runs/{run.pk}/" in part and "/alerts/ack/" in part
    assert "Verdict: fail on spec v1" in text and "<table" in html
    alert.refresh_from_db()
    assert alert.delivered_at is not None and alert.attempts == 1


def test_the_deciding_clause_is_shown_with_its_estimate_interval_and_bar(
    smtp, actor, vendor_viewer, engagement, host, customer_owner
):
    clause = {
        "metric": "ttft_p50",
        "tier": 16,
        "estimate": 12.5,
        "low": 8.25,
        "high": 17.0,
        "threshold": 25,
        "verdict": "fail",
        "cause": "reduction below the bar",
    }
    passing = {**clause, "tier": 8, "verdict": "pass", "estimate": 31.0}
    fail_gate(actor, vendor_viewer, engagement, host, clauses=[passing, clause])
    alert = Alert.objects.get(event="gate_failed")
    assert alert.facts["decision"]["clause"]["tier"] == 16
    tasks.deliver_alert(alert.pk)
    text, html = text_and_html(smtp.messages[0][1])
    assert "ttft_p50 at c=16 (fail)" in text
    assert "estimate 12.500, interval [8.250, 17.000]" in text and "bar 25" in text
    assert "[8.250, 17.000]" in html and "31.000" not in text


def test_a_member_who_opted_out_gets_nothing(smtp, failed_gate, customer_viewer):
    Membership.objects.filter(user=customer_viewer).update(receives_alerts=False)
    assert "cviewer@example.com" not in services.alert_recipients(failed_gate.engagement)


def test_a_muted_switchable_event_skips_that_person_but_not_the_critical_ones(
    smtp, actor, vendor_viewer, engagement, host, customer_viewer, customer_owner
):
    AlertPreference.objects.create(user=customer_viewer, muted_events=["gate_inconclusive"])
    fail_gate(actor, vendor_viewer, engagement, host, verdict="inconclusive")
    inconclusive = Alert.objects.get(event="gate_inconclusive")
    assert "cviewer@example.com" not in inconclusive.recipients
    assert "cowner@example.com" in inconclusive.recipients
    assert "cviewer@example.com" in services.alert_recipients(engagement, event="gate_failed")


def test_an_engagement_can_switch_invalid_verdicts_off(
    smtp, actor, vendor_viewer, engagement, host, customer_owner
):
    AlertSettings.objects.create(engagement=engagement, disabled_events=["gate_invalid"])
    fail_gate(actor, vendor_viewer, engagement, host, verdict="invalid")
    assert not Alert.objects.filter(event="gate_invalid").exists()
    AlertSettings.objects.filter(engagement=engagement).update(disabled_events=[])
    fail_gate(actor, vendor_viewer, engagement, host, verdict="infra_error")
    assert Alert.objects.filter(event="gate_infra_error").count() == 1


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


def test_a_callers_body_still_works_and_a_context_renders_the_events_template(engagement):
    plain = services.alert_enqueue(
        event="spec_proposed", key="k1", engagement=engagement, subject="s", body="the diff"
    )
    gate = engagement.gates.get(kind="G1")
    rendered = services.alert_enqueue(
        event="gate_waive",
        key="k2",
        engagement=engagement,
        gate=gate,
        subject="s",
        body="unused",
        context={"gate": gate, "who": "vadmin", "verb": "waived", "justification": "why"},
    )
    assert plain.body.startswith("the diff")
    assert rendered.body.startswith("vadmin waived G1 arrival acceptance.")


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_after_smtp_accepted_resends_with_the_same_message_id(
    smtp, failed_gate, settings
):
    """The one window for a second copy: the server took the message, the worker died
    before the commit. The copy carries the same Message-ID, so mail clients fold it."""
    alert = Alert.objects.get(event="gate_failed")
    smtp.hold.clear()  # the server keeps the message but waits before it answers 250
    env = process_environment(
        EMAIL_BACKEND=settings.EMAIL_BACKEND,
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(settings.EMAIL_PORT),
    )
    code = f"from gates import services; services.alert_deliver(alert_id={alert.pk})"
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(smtp.messages) == 1, timeout=60)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        smtp.hold.set()
    alert.refresh_from_db()
    assert alert.delivered_at is None  # the worker died before marking it
    # The killed transaction's lock goes with its connection; poll until it is free.
    wait_for(lambda: services.alert_deliver(alert_id=alert.pk), timeout=30, interval=0.2)
    assert len(smtp.messages) == 2
    first, second = (message for _, message in smtp.messages)
    assert first["Message-ID"] == second["Message-ID"] == message_id(alert.idempotency_key)
