"""Redis (broker and cache alike) killed and restarted under real Celery worker and beat
processes (issue 27): while a G3 is being measured and decided, and while a G4 soak ticks.
Nothing measured is lost or stored twice, the verdict is reached, pages and API answer (no 500)
during the outage, and the same worker process is alive afterwards: before the fix it exited
with "Unrecoverable error: AttributeError('NoneType' object has no attribute 'hostname')".

Redis here is a redis-server of the test's own (tests.gates.test_outage.RedisServer), killed
with SIGKILL as a crash would; the shared one is never touched.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.demo.world import SHORT_CHAT
from gates.models import Measurement, Run, SoakSample
from tests.celeryproc import CeleryProcess, wait_or_show
from tests.gates.test_outage import RedisServer, _drop_broker_pools
from tests.gates.test_tenancy import token_client
from tests.runners.program.test_gate_programs import pass_gate, start
from tests.runners.soak.test_soak import LOOSE_DRIFT, assert_every_seq_once, g4_spec, soak_host
from tests.simhosts import g3_spec, ssh_simhost

pytestmark = [pytest.mark.fault, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
LOST = "Connection to broker lost"


@pytest.fixture
def redis_own(settings, monkeypatch):
    """Broker and cache of the worker, the beat and this test's own pages on one Redis."""
    server = RedisServer()
    server.start()
    # Celery reads the environment variable before its own setting.
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{server.port}/0")
    _drop_broker_pools()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{server.port}/1",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    yield server
    if server.process:
        server.stop()
    monkeypatch.undo()
    _drop_broker_pools()


@pytest.fixture
def celery(tmp_path, redis_own):
    started: list[CeleryProcess] = []

    def launch(role: str, name: str) -> CeleryProcess:
        env = {
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{redis_own.port}/0",
            "CACHE_URL": f"redis://127.0.0.1:{redis_own.port}/1",
        }
        process = CeleryProcess(role, tmp_path, name, env=env).start()
        started.append(process)
        return process

    yield launch
    for process in started:
        process.stop()


def _no_server_error(client, api, run: Run) -> None:
    """What a user opens while Redis is down: answered, degraded at most, never a 5xx; only
    /healthz says 503 (the broker is required), naming what is down."""
    for where, response in {
        "gate page": client.get(reverse("gates:gate-detail", args=[run.gate_id])),
        "run page": client.get(reverse("gates:run-detail", args=[run.pk])),
        "api run": api.get(reverse("api:run-detail", args=[run.pk])),
        "api statistics": api.get(reverse("api:gate-statistics", args=[run.gate_id])),
    }.items():
        assert response.status_code < 500, (where, response.status_code)
    health = client.get("/healthz")
    assert health.status_code == 503
    checks = health.json()["checks"]
    assert not checks["broker"]["ok"] and not checks["cache"]["ok"]


def _ride_out_an_outage(redis_own, worker: CeleryProcess, client, api, run: Run) -> None:
    redis_own.stop()
    wait_or_show(lambda: LOST in worker.log(), 60, worker)
    _no_server_error(client, api, run)
    redis_own.start()


def test_a_g3_measured_and_decided_across_a_redis_outage(
    celery,
    redis_own,
    client,
    actor,
    vendor_viewer,
    vendor_admin,
    vendor_org,
    engagement,
    customer_org,
    own_sshd,
    tmp_path,
):
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host")
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    beat = celery("beat", "beat")
    worker = celery("worker", "w1")
    client.force_login(vendor_admin)
    api = token_client(vendor_admin, vendor_org)
    # The start's poke goes to the session's broker; the beat's re-dispatch finds the run.
    # Short prompts at one tier: the lightest G3 simhost runs, the verdict whatever it is.
    spec = g3_spec(workload=dict(SHORT_CHAT), tiers=[1])
    run = start(actor, vendor_viewer, engagement, "G3", host, spec)
    wait_or_show(lambda: Measurement.objects.filter(run=run).count() >= 2, 120, worker, beat)
    _ride_out_an_outage(redis_own, worker, client, api, run)

    wait_or_show(lambda: Run.objects.get(pk=run.pk).is_ended, 240, worker, beat)
    run.refresh_from_db()
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    cells = list(Measurement.objects.filter(run=run).values_list("arm", "tier", "repetition"))
    assert len(cells) == len(set(cells))  # none stored twice
    assert run.decisions.count() == 1  # the verdict, reached once
    assert worker.process is not None and worker.process.poll() is None, worker.log()[-4000:]
    assert "Unrecoverable" not in worker.log()


def test_a_soak_ticks_on_across_a_redis_outage(
    celery,
    redis_own,
    client,
    actor,
    vendor_viewer,
    vendor_admin,
    vendor_org,
    engagement,
    customer_org,
    own_sshd,
    tmp_path,
):
    host = soak_host(customer_org, own_sshd, tmp_path)
    for kind in ("G1", "G2", "G3"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    beat = celery("beat", "beat")
    worker = celery("worker", "w1")
    client.force_login(vendor_admin)
    api = token_client(vendor_admin, vendor_org)
    run = start(actor, vendor_viewer, engagement, "G4", host, g4_spec(seconds=20, **LOOSE_DRIFT))
    wait_or_show(lambda: SoakSample.objects.filter(run=run).count() >= 3, 90, worker, beat)
    _ride_out_an_outage(redis_own, worker, client, api, run)

    wait_or_show(lambda: Run.objects.get(pk=run.pk).is_ended, 90, worker, beat)
    run.refresh_from_db()
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    assert run.decisions.get().verdict == "pass"
    assert_every_seq_once(run)  # every window stored once: nothing lost, nothing doubled
    assert worker.process is not None and worker.process.poll() is None, worker.log()[-4000:]
    assert "Unrecoverable" not in worker.log()
