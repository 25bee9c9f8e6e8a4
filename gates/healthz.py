"""/healthz and what it reports: whether this service can do its job, one machine-readable check per
dependency (database, broker, cache, the worker canary). Reads only; never raises.

Required checks (database, broker) failing make the answer a 503, so a load balancer stops
sending traffic; the cache has a per-process fallback and a stale worker canary is for an
on-call person (another web node would not help), so those two only mark it degraded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from config.celery import app
from gates import services
from gates.models import ServiceHeartbeat

CANARY_STALE_S = 180
BROKER_TIMEOUT_S = 2.0


@dataclass
class Check:
    ok: bool
    required: bool
    error: str | None = None
    details: dict = field(default_factory=dict)


def service_health() -> dict:
    checks = {
        "database": _probe(_database, required=True),
        "broker": _probe(_broker, required=True),
        "cache": _probe(_cache, required=False),
        "worker": _worker(),
    }
    if not all(c.ok for c in checks.values() if c.required):
        status = "unavailable"
    else:
        status = "ok" if all(c.ok for c in checks.values()) else "degraded"
    return {"status": status, "checks": {name: asdict(c) for name, c in checks.items()}}


def _probe(check, *, required: bool) -> Check:
    try:
        check()
    except Exception as error:  # any failure is the answer, not a 500 of /healthz itself
        return Check(ok=False, required=required, error=f"{type(error).__name__}: {error}"[:300])
    return Check(ok=True, required=required)


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    with app.connection_for_write() as broker:
        broker.ensure_connection(
            max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT_S
        )
        # A virtual transport (Redis) connects lazily: ask its server to answer.
        client = getattr(broker.default_channel, "client", None)
        if client is not None:
            client.ping()


def _cache() -> None:
    cache = caches["default"]
    cache.set("healthz", "ok", 30)
    if cache.get("healthz") != "ok":
        raise RuntimeError("a value set was not read back")


def _worker() -> Check:
    try:
        beat = ServiceHeartbeat.objects.filter(name="worker").first()
    except Exception as error:  # the database check names the cause
        return Check(ok=False, required=False, error=type(error).__name__)
    age = (timezone.now() - beat.at).total_seconds() if beat else None
    ok = age is not None and age < CANARY_STALE_S
    return Check(
        ok=ok,
        required=False,
        error=None if ok else "no canary from a worker in the last 180 s",
        details={"canary_age_s": age},
    )


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """For load balancers and compose: 503 when a required dependency fails (service_health below);
    the worker and beat heartbeats, and which are stale, beside the checks."""
    report = service_health()
    if report["checks"]["database"]["ok"]:  # the heartbeats are rows: unreadable without it
        report.update(services.heartbeat_report())
        if report["stale"] and report["status"] == "ok":
            report["status"] = "degraded"
    return JsonResponse(report, status=503 if report["status"] == "unavailable" else 200)
