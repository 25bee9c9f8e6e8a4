"""The dead-man switch with a real beat and worker: `manage.py healthcheck` fails naming the
beat once it is stopped, sends "Tollgate has gone silent" once, and passes when beat is back."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from gates import services
from gates.models import Alert, ServiceHeartbeat
from tests.celeryproc import ROOT, CeleryProcess, process_environment, purge_broker
from tests.sshd import wait_for


def healthcheck(*options: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "healthcheck", *options],
        cwd=ROOT,
        env=process_environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_healthcheck_fails_with_beat_stopped_and_passes_when_it_runs_again(
    smtp, settings, tmp_path, monkeypatch
):
    monkeypatch.setenv("TOLLGATE_BEAT_HEARTBEAT_S", "1")
    monkeypatch.setenv("TOLLGATE_BEAT_STALE_S", "4")
    mail = {
        "EMAIL_BACKEND": settings.EMAIL_BACKEND,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(settings.EMAIL_PORT),
        "TOLLGATE_ONCALL_EMAILS": "oncall@vendor.example",
    }
    purge_broker()
    beat = CeleryProcess("beat", tmp_path, "beat").start()
    # The worker gets the same SMTP server: the alert is enqueued before the command sends
    # it, so a worker that takes the delivery first must reach the same inbox (with the test
    # settings' in-memory backend it would mark the alert delivered and send nothing).
    worker = CeleryProcess("worker", tmp_path, "worker", env=mail).start()
    try:
        # Until both have written a first heartbeat the check fails: report only, no alert.
        wait_for(
            lambda: healthcheck("--no-alert", **mail).returncode == 0, timeout=90, interval=0.5
        )
        assert not smtp.messages
        beat.kill()
        failed = wait_for(
            lambda: (r := healthcheck(**mail)).returncode == 1 and r, timeout=60, interval=0.5
        )
        assert "stale: beat" in failed.stderr and "worker" not in failed.stderr.split("stale:")[1]
        report = json.loads(failed.stdout)
        assert report["stale"] == ["beat"] and report["heartbeats"]["worker"]["ok"]
        assert "silence alert sent" in failed.stderr, failed.stderr
        wait_for(lambda: len(smtp.messages) == 1, timeout=30)
        assert healthcheck(**mail).returncode == 1
        recipients, message = smtp.messages[0]
        assert recipients == ["oncall@vendor.example"]
        assert "Tollgate has gone silent" in message["Subject"]
        beat = CeleryProcess("beat", tmp_path, "beat2").start()
        wait_for(lambda: healthcheck(**mail).returncode == 0, timeout=90, interval=0.5)
        assert len(smtp.messages) == 1  # one silence, one alert
    finally:
        beat.kill()
        worker.kill()


@pytest.mark.django_db
def test_healthz_reports_the_same_heartbeats_as_json(client, settings):
    settings.TOLLGATE_BEAT_STALE_S = 60
    ServiceHeartbeat.objects.create(name="worker", at=timezone.now())
    ServiceHeartbeat.objects.create(name="beat", at=timezone.now() - timezone.timedelta(seconds=61))
    body = client.get("/healthz").json()
    assert body["stale"] == ["beat"]
    assert body["heartbeats"]["worker"]["ok"] and not body["heartbeats"]["beat"]["ok"]
    assert body["heartbeats"]["beat"]["limit_s"] == 60


@pytest.mark.django_db(transaction=True)
def test_a_silence_alert_a_worker_is_sending_is_reported_sent_once_it_lands(settings):
    """The race the real-worker test met: the poke at enqueue lets a worker take the alert and
    hold its row while it talks to the mail server; the command waits for that delivery instead
    of saying "not yet sent" about a message on its way."""
    settings.TOLLGATE_BEAT_STALE_S = 60
    ServiceHeartbeat.objects.create(name="beat", at=timezone.now() - timezone.timedelta(hours=1))
    alert = services.silence_alert_send(stale=["beat"])  # locmem: delivered here
    Alert.objects.filter(pk=alert.pk).update(delivered_at=None)  # as if a worker had it instead
    worker_holds_it, done = threading.Event(), threading.Event()

    def worker_delivering() -> None:
        try:
            with transaction.atomic():
                list(Alert.objects.select_for_update().filter(pk=alert.pk).values("pk"))
                worker_holds_it.set()
                wait_for(_someone_waits_on_a_row_lock, timeout=30, interval=0.05)
                Alert.objects.filter(pk=alert.pk).update(delivered_at=timezone.now())
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=worker_delivering)
    thread.start()
    assert worker_holds_it.wait(30)
    reported = services.silence_alert_send(stale=["beat"])
    thread.join(30)
    assert done.is_set() and reported.delivered_at is not None


def _someone_waits_on_a_row_lock() -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0
