"""The banner every signed-in page shows while part of Tollgate is down (issue 30 item 4):
with a real worker and beat stopped, with the broker of a redis-server the test stops, and on
a run that has not moved for longer than a step may take."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from gates import services
from gates.models import Run
from gates.templatetags import service_tags
from tests.celeryproc import CeleryProcess, purge_broker
from tests.gates.test_outage import own_redis  # noqa: F401  (a fixture)
from tests.sshd import wait_for


def banner(client) -> str:
    page = client.get(reverse("gates:engagement-list")).content.decode()
    if 'data-banner="service-down"' not in page:
        return ""
    return page[page.index('data-banner="service-down"') :].split("</div>", 1)[0]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_page_says_so_while_the_worker_is_stopped(
    client, customer_viewer, settings, tmp_path, monkeypatch
):
    monkeypatch.setenv("TOLLGATE_BEAT_HEARTBEAT_S", "1")
    settings.TOLLGATE_WORKER_STALE_S = 6
    settings.TOLLGATE_BEAT_STALE_S = 6
    client.force_login(customer_viewer)
    assert "The worker has never reported" in banner(client)  # nothing has run yet
    purge_broker()
    beat = CeleryProcess("beat", tmp_path, "beat").start()
    worker = CeleryProcess("worker", tmp_path, "worker").start()
    try:
        wait_for(lambda: banner(client) == "", timeout=90, interval=0.5)
        worker.kill()
        shown = wait_for(lambda: banner(client), timeout=60, interval=0.5)
        assert "The worker has not reported for" in shown
        assert "runs do not start or move and no verdict is decided" in shown
        assert "beat" not in shown
    finally:
        beat.kill()
        worker.kill()


@pytest.mark.django_db
def test_the_banner_names_the_broker_while_it_is_down(own_redis, client, customer_viewer):  # noqa: F811
    for name in ("worker", "beat"):
        services.heartbeat_record(name=name)
    client.force_login(customer_viewer)
    service_tags.broker_probe_forget()
    assert banner(client) == ""
    own_redis.stop()
    service_tags.broker_probe_forget()
    shown = banner(client)
    assert "The queue (broker) is unreachable: new runs cannot be queued." in shown
    own_redis.start()
    service_tags.broker_probe_forget()


@pytest.mark.django_db
def test_a_run_that_has_not_moved_for_longer_than_a_step_says_so(
    client, vendor_admin, engagement, settings
):
    for name in ("worker", "beat"):
        services.heartbeat_record(name=name)
    gate = engagement.gates.get(kind="G1")
    run = Run.objects.create(
        gate=gate,
        spec=gate.current_spec,
        attempt=1,
        state=Run.State.RUNNING,
        source=Run.Source.REMOTE,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    client.force_login(vendor_admin)
    url = reverse("gates:run-detail", args=[run.pk])
    assert 'data-banner="stalled"' not in client.get(url).content.decode()
    quiet = timezone.now() - timedelta(seconds=settings.TOLLGATE_RUN_STALE_AFTER_S + 60)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=quiet)
    page = client.get(url).content.decode()
    assert 'data-banner="stalled"' in page and "No sign of life for 6 min" in page


@pytest.mark.django_db
def test_a_part_its_supervisor_restarted_is_said_on_every_page(client, customer_viewer):
    client.force_login(customer_viewer)
    page = client.get(reverse("gates:engagement-list")).content.decode()
    assert 'data-banner="service-restarted"' not in page
    services.service_restart_record(name="worker", reason="exit code -9")
    page = client.get(reverse("gates:engagement-list")).content.decode()
    assert 'data-banner="service-restarted"' in page
    assert "The worker stopped and was started again by its supervisor at" in page
