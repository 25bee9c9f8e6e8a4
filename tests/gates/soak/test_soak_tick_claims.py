"""Soak tick messages are pokes: the claim needs the tick due, so a duplicate or late message
for a tick already done does nothing, and the beat sends one message per due soak until that
message has had its time (a lagging queue sheds load instead of piling up ticks).
Real PostgreSQL and the test session's Redis broker."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from config.queues import TICKS
from gates.models import Host, Run, Soak
from gates.services.soak import ticks as soak_service
from runners.soak import collector
from tests.celeryproc import purge_broker
from tests.simhosts import local_simhost
from worker import tasks

pytestmark = pytest.mark.django_db
T0 = 1.8e9


@pytest.fixture
def due_soak(engagement, customer_org, settings, tmp_path) -> Soak:
    settings.TOLLGATE_SOAK_TICK_S = 30
    settings.TOLLGATE_SOAK_POKE_S = 60
    return leased_due_soak(engagement, customer_org, tmp_path)


def leased_due_soak(engagement, customer_org, tmp_path) -> Soak:
    """A G4 soak whose tick is due, its run holding the lease on a simhost host."""
    host = local_simhost(customer_org, tmp_path)
    gate = engagement.gates.get(kind="G4")
    run = Run.objects.create(
        gate=gate, spec=gate.current_spec, host=host, attempt=1, state=Run.State.RUNNING
    )
    # The run holds its host, as a launched soak does.
    Host.objects.filter(pk=host.pk).update(lease_run=run, fencing_token=7)
    Run.objects.filter(pk=run.pk).update(lease_token=7)
    return Soak.objects.create(
        run=run, run_dir="/tmp/x", agent_sha256="0" * 64, started=T0, next_tick_at=timezone.now()
    )


@pytest.fixture
def host_reads(monkeypatch) -> list[int]:
    """Stands in for the host (reading it is tested with a real agent in tests/runners/soak):
    each read is counted and finds the agent running with nothing new."""
    reads: list[int] = []

    def read(transport, state, scratch):
        reads.append(1)
        now = time.time()
        found = collector.Read(now, now, None, "b", T0, T0 + 3600, state.offset, [])
        return collector.TickOutcome(found, agent_running=True)

    monkeypatch.setattr(tasks.soak_host, "tick", read)
    return reads


def test_a_second_tick_message_for_a_soak_just_ticked_does_nothing(due_soak, host_reads):
    tasks.tick_soak(due_soak.run_id)
    ticked = Soak.objects.get(pk=due_soak.pk)
    assert host_reads == [1] and ticked.next_tick_at > timezone.now()

    tasks.tick_soak(due_soak.run_id)  # the duplicate: the beat's twice, or a redelivery

    assert host_reads == [1]
    again = Soak.objects.get(pk=due_soak.pk)
    assert again.next_tick_at == ticked.next_tick_at
    assert again.last_contact_at == ticked.last_contact_at


def test_a_tick_message_is_taken_again_once_the_next_tick_is_due(due_soak, host_reads):
    tasks.tick_soak(due_soak.run_id)
    Soak.objects.filter(pk=due_soak.pk).update(next_tick_at=timezone.now())
    tasks.tick_soak(due_soak.run_id)
    assert host_reads == [1, 1]


def test_of_two_claims_at_once_only_one_reads(due_soak):
    first = soak_service.soak_tick_claim(due_soak.run_id)
    assert first is not None
    assert soak_service.soak_tick_claim(due_soak.run_id) is None
    soak_service.soak_tick_release(first)
    assert soak_service.soak_tick_claim(due_soak.run_id) is None  # released, but not due


def test_the_beat_pokes_a_due_soak_once_until_the_poke_has_had_its_time(due_soak):
    assert soak_service.soaks_due() == [due_soak.run_id]
    # The queue lags: the message waits, the soak stays due, and no second one is sent.
    assert soak_service.soaks_due() == []
    assert soak_service.soaks_due() == []
    # The message was lost or expired unread: after its time the beat sends a fresh one.
    Soak.objects.filter(pk=due_soak.pk).update(poked_until=timezone.now() - timedelta(seconds=1))
    assert soak_service.soaks_due() == [due_soak.run_id]


def test_a_finished_tick_lets_the_beat_poke_the_soak_when_it_is_next_due(due_soak):
    assert soak_service.soaks_due() == [due_soak.run_id]
    tick = soak_service.soak_tick_claim(due_soak.run_id)
    soak_service.soak_tick_release(tick)
    assert soak_service.soaks_due() == []  # not due for another TOLLGATE_SOAK_TICK_S
    Soak.objects.filter(pk=due_soak.pk).update(next_tick_at=timezone.now())
    assert soak_service.soaks_due() == [due_soak.run_id]


def test_the_beat_sends_each_tick_on_the_ticks_queue_expiring_with_its_poke(due_soak, settings):
    purge_broker()
    tasks.tick_soaks()
    tasks.tick_soaks()  # the next sweep, while the first message still waits
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    messages = [json.loads(raw) for raw in broker.lrange(TICKS, 0, -1)]
    assert [m["headers"]["task"] for m in messages] == ["runners.tick_soak"]
    expires = timezone.datetime.fromisoformat(messages[0]["headers"]["expires"])
    assert 50 <= (expires - timezone.now()).total_seconds() <= 60
    purge_broker()
