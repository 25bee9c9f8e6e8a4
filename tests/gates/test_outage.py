"""A Redis outage (issue 12 item 2, issue 27), against a redis-server this module starts on a
free port and stops itself: the API keeps answering (limits fall back per process), a run start
is kept in the outbox and poked once the broker is back, /healthz says which dependency is down,
and a G3 is decided, its page and statistics shown, with the cache gone (gates.cache)."""

from __future__ import annotations

import base64
import json
import logging
import socket
import subprocess
import time

import pytest
import redis
from django.urls import reverse
from redis.backoff import NoBackoff
from redis.retry import Retry

from config.celery import app
from config.queues import ALL_QUEUES
from gates import cache as shared_cache
from gates.api.rest import throttling
from gates.models import Run
from gates.services.runs import evaluation
from tests.conftest import make_host
from tests.gates.pages.test_dashboards import (
    open_g3,
    record_g3_decision,
    record_measurements,
    synthetic_measurements,
    uploaded_run,
)
from tests.gates.test_tenancy import token_client
from tests.sshd import wait_for
from worker import tasks


class RedisServer:
    """One redis-server of this test's own, on a port nobody else uses."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", "/tmp"),
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for(self.answers)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()  # a crash, as an outage is; SIGTERM makes it linger seconds
            self.process.wait(timeout=10)
            self.process = None
        assert not self.answers()

    def client(self, db: int = 0) -> redis.Redis:
        # No retries: redis-py's default backs off for seconds before saying "down".
        return redis.Redis(port=self.port, db=db, socket_timeout=0.5, retry=Retry(NoBackoff(), 0))

    def answers(self) -> bool:
        try:
            return self.client().ping()
        except redis.RedisError:
            return False

    def queued_tasks(self) -> list[tuple[str, list]]:
        """The task names and arguments waiting in Celery's queues."""
        client = self.client()
        raws = [raw for queue in ALL_QUEUES for raw in client.lrange(queue, 0, -1)]
        messages = [json.loads(raw) for raw in raws]
        return [(m["headers"]["task"], json.loads(_body(m))[0]) for m in messages]


def _body(message: dict) -> str:
    return base64.b64decode(message["body"]).decode()


@pytest.fixture
def own_redis(settings, monkeypatch):
    """Cache and broker on a redis-server of the test's own; both restored afterwards."""
    server = RedisServer()
    server.start()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{server.port}/1",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    # Celery reads the environment variable before its own setting.
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{server.port}/0")
    _drop_broker_pools()
    throttling.LIMITS_CACHE.outage.end()
    yield server
    if server.process:
        server.stop()
    monkeypatch.undo()
    _drop_broker_pools()
    throttling.LIMITS_CACHE.outage.end()


def _drop_broker_pools() -> None:
    # Celery keeps connection and producer pools for the URL it first used.
    pool, app._pool, app.amqp._producer_pool = app._pool, None, None
    if pool is not None:
        pool.force_close_all()


@pytest.fixture
def vendor_api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


@pytest.mark.django_db
def test_api_reads_answer_200_while_redis_is_down_with_limits_kept_per_process(
    own_redis, vendor_api, engagement, caplog
):
    assert vendor_api.get(reverse("api:engagement-list")).status_code == 200
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="gates.api.rest.throttling"):
        for _ in range(3):
            assert vendor_api.get(reverse("api:engagement-list")).status_code == 200
    warnings = [r for r in caplog.records if "rate limits are per process" in r.message]
    assert len(warnings) == 1  # once per retry interval, not once per request
    assert throttling.LIMITS_CACHE.degraded


@pytest.mark.django_db
def test_healthz_answers_503_naming_the_broker_and_cache_while_redis_is_down(own_redis, client):
    up = client.get("/healthz").json()["checks"]
    assert up["broker"]["ok"] and up["cache"]["ok"]
    own_redis.stop()
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503 and body["status"] == "unavailable"
    assert not body["checks"]["broker"]["ok"] and body["checks"]["broker"]["required"]
    assert not body["checks"]["cache"]["ok"] and body["checks"]["database"]["ok"]
    own_redis.start()
    assert client.get("/healthz").json()["checks"]["broker"]["ok"]


@pytest.mark.django_db(transaction=True)
def test_a_run_start_answers_202_while_the_broker_is_down_and_is_poked_once_it_is_back(
    own_redis, vendor_api, engagement, customer_org
):
    host = make_host(customer_org)
    gate = engagement.gates.get(kind="G1")
    own_redis.stop()
    started = time.monotonic()
    response = vendor_api.post(reverse("api:gate-runs", args=[gate.pk]), {"host": host.name})
    took = time.monotonic() - started
    assert response.status_code == 202, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.state == "queued" and run.last_dispatched_at is None
    own_redis.start()
    assert own_redis.queued_tasks() == []  # the poke was lost with the broker...
    tasks.redispatch_runs()  # ...and the beat's sweep sends it now
    assert own_redis.queued_tasks() == [("runners.advance_run", [run.pk])]
    assert took < 10, f"the start waited {took:.1f} s on the broker"


@pytest.mark.django_db
def test_a_g3_is_decided_with_its_operating_characteristic_while_the_cache_is_down(
    own_redis, actor, vendor_viewer, engagement
):
    gate = open_g3(actor, vendor_viewer, engagement)
    run = uploaded_run(actor, vendor_viewer, gate)
    # Every planned repetition, so the last look decides whatever the interim looks said.
    record_measurements(run, synthetic_measurements(run.spec.document["repetitions"]["max"]))
    own_redis.stop()
    found = evaluation.run_evaluate(run)
    assert found.decided and found.verdict in {"pass", "fail", "inconclusive"}
    decision = run.gate.decisions.get()
    assert decision.result["operating_characteristic"]["available"]


@pytest.mark.django_db
def test_the_g3_page_and_statistics_answer_200_while_the_cache_is_down_then_cache_again(
    own_redis,
    client,
    actor,
    vendor_viewer,
    engagement,
    customer_viewer,
    customer_owner,
    customer_org,
    caplog,
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    client.force_login(customer_viewer)
    api = token_client(customer_owner, customer_org)
    page = reverse("gates:gate-detail", args=[decision.gate_id])
    statistics = reverse("api:gate-statistics", args=[decision.gate_id])
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="gates.cache"):
        response = client.get(page)
        assert response.status_code == 200
        assert "What this spec can decide" in response.content.decode()
        response = api.get(statistics)
        assert response.status_code == 200
        assert response.json()["operating_characteristic"]["available"]
    assert len([r for r in caplog.records if r.name == "gates.cache"]) == 1
    own_redis.start()
    shared_cache._OUTAGE.end()  # the retry interval, passed
    assert api.get(statistics).status_code == 200
    assert any(key.startswith(b":1:tollgate:oc:") for key in own_redis.client(db=1).scan_iter())
