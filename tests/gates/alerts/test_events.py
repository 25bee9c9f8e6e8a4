"""Each event is raised once, keyed by what caused it: a changed host key refused by the real
SSH transport, a run's infrastructure error, a waiver and a stop at stop-loss review."""

from __future__ import annotations

import pytest
from django.utils import timezone

from gates import services
from gates.alerts import events
from gates.models import Alert, HostCleanup
from gates.services import pokes
from tests.gates.alerts.conftest import fail_gate
from tests.simhosts import ssh_simhost
from tests.sshd import loopback_sshd
from worker import tasks

pytestmark = pytest.mark.django_db


def test_a_changed_host_key_fails_the_run_and_alerts_once_per_pinned_key(
    actor, vendor_viewer, engagement, customer_org, tmp_path, monkeypatch
):
    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    (tmp_path / "sshd").mkdir()
    with loopback_sshd(tmp_path / "sshd") as server:
        host = ssh_simhost(customer_org, server, tmp_path / "host")
        server.regenerate_host_key()  # a reinstalled host, or someone in between
        gate = engagement.gates.get(kind="G1")
        runs = []
        for _ in range(2):
            run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
            tasks.advance_run(run.pk)
            run.refresh_from_db()
            runs.append(run)
            # The failed run leaves a cleanup the janitor cannot do while the key is wrong, and
            # the host refuses leases meanwhile: an operator who checked it by hand clears it.
            HostCleanup.objects.filter(host=host).update(done_at=timezone.now())
    assert [r.outcome for r in runs] == ["infra_error", "infra_error"]
    changed = Alert.objects.get(event="host_key_changed")
    assert changed.critical and changed.run == runs[0]
    assert changed.idempotency_key == events.host_key_changed_key(host.pk, host.host_key)
    assert host.name in changed.subject and "refused to connect" in changed.body
    assert Alert.objects.filter(event="run_error", parent__isnull=True).count() == 2


def test_a_run_infra_error_is_alerted_once_as_not_a_product_failure(
    actor, vendor_viewer, engagement, host
):
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_fail(run_id=run.pk, outcome="infra_error", reason="connection reset")
    services.run_fail(run_id=run.pk, outcome="infra_error", reason="again")  # already ended
    alert = Alert.objects.get(event="run_error")
    assert "not a product failure" in alert.body and "connection reset" in alert.body
    assert alert.facts["run"]["outcome"] == "infra_error" and not alert.critical


def test_stop_loss_review_then_a_waiver_each_alert_once(
    actor, vendor_viewer, engagement, host, customer_owner
):
    fail_gate(actor, vendor_viewer, engagement, host)
    gate = fail_gate(actor, vendor_viewer, engagement, host)  # max_attempts 2: review opens
    review = Alert.objects.get(event="stop_loss_review")
    assert review.critical and "stop-loss review" in review.subject
    assert "Attempts are spent" in review.body
    services.gate_waive(
        actor=actor, viewer=vendor_viewer, gate=gate, justification="the customer accepts 4 GPUs"
    )
    waived = Alert.objects.get(event="gate_waive")
    assert waived.idempotency_key == events.review_key("gate.waive", gate.pk)
    assert "the customer accepts 4 GPUs" in waived.body and not waived.critical


def test_every_catalogued_event_has_a_title_and_only_switchables_are_switchable():
    assert set(events.SWITCHABLE) == {"gate_inconclusive", "gate_invalid", "gate_infra_error"}
    assert all(
        events.is_critical(name)
        for name in ("gate_failed", "stop_loss_review", "soak_crash", "orchestrator_silent")
    )
    assert events.event_kind("something_new").title == "something new"
