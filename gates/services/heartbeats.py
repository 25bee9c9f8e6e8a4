"""The dead-man switch: heartbeats of the worker and the beat, their staleness checks (what
/healthz and `manage.py healthcheck` report), and the "Tollgate has gone silent" alert the
healthcheck sends itself, from cron, when the beat that would deliver it is the one that died."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gates.alerts.events import silence_key
from gates.models import Alert, ServiceHeartbeat
from gates.services.alerts.delivery import alert_deliver
from gates.services.alerts.outbox import alert_enqueue

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeartbeatCheck:
    name: str
    age_s: float | None
    limit_s: int
    last_at: str | None

    @property
    def ok(self) -> bool:
        return self.age_s is not None and self.age_s <= self.limit_s


def heartbeat_limits() -> dict[str, int]:
    return {
        "worker": settings.TOLLGATE_WORKER_STALE_S,
        "beat": settings.TOLLGATE_BEAT_STALE_S,
    }


def heartbeat_record(*, name: str) -> None:
    ServiceHeartbeat.objects.update_or_create(name=name, defaults={"at": timezone.now()})


# A supervisor's restart of a service that died is kept as the heartbeat row of this prefix
# and the service's name: its time is the last restart's.
RESTART_PREFIX = "restarted:"


def service_restart_record(*, name: str, reason: str = "") -> None:
    """A supervisor (the demo's) started `name` again after it died; `reason` goes to the log."""
    logger.warning("%s restarted by its supervisor: %s", name, reason or "it had exited")
    heartbeat_record(name=RESTART_PREFIX + name)


def service_restarts(seen: dict | None = None) -> dict[str, str]:
    """The services restarted within TOLLGATE_RESTART_SHOWN_S, with the last restart's time:
    what /healthz reports under "restarts" and a page's banner can show. `seen`: the heartbeat
    rows as name -> time when the caller read them already (one query a page)."""
    since = timezone.now() - timedelta(seconds=settings.TOLLGATE_RESTART_SHOWN_S)
    rows = _heartbeat_rows() if seen is None else seen
    return {
        name.removeprefix(RESTART_PREFIX): at.isoformat()
        for name, at in rows.items()
        if name.startswith(RESTART_PREFIX) and at >= since
    }


def heartbeat_checks(seen: dict | None = None) -> list[HeartbeatCheck]:
    now = timezone.now()
    seen = _heartbeat_rows() if seen is None else seen
    checks = []
    for name, limit in heartbeat_limits().items():
        at = seen.get(name)
        age = round((now - at).total_seconds(), 1) if at else None
        checks.append(HeartbeatCheck(name, age, limit, at.isoformat() if at else None))
    return checks


def heartbeat_state() -> tuple[list[HeartbeatCheck], dict[str, str]]:
    """The checks and the recent restarts from one read of the heartbeat rows."""
    seen = _heartbeat_rows()
    return heartbeat_checks(seen), service_restarts(seen)


def _heartbeat_rows() -> dict:
    return dict(ServiceHeartbeat.objects.values_list("name", "at"))


def heartbeat_report() -> dict:
    """The JSON /healthz and the healthcheck command print: each heartbeat, and what is stale."""
    checks = heartbeat_checks()
    return {
        "heartbeats": {c.name: {**asdict(c), "ok": c.ok} for c in checks},
        "stale": [c.name for c in checks if not c.ok],
        "restarts": service_restarts(),
    }


def silence_alert_send(*, stale: list[str]) -> Alert | None:
    """Alert on-call that Tollgate went silent, once per silence, and send it right here:
    the worker and the beat that would deliver it may be the very things that died."""
    if not stale:
        return None
    seen = ServiceHeartbeat.objects.filter(name__in=stale).order_by("-at").first()
    since = int(seen.at.timestamp()) if seen else 0
    alert = alert_enqueue(
        event="orchestrator_silent",
        key=silence_key(tuple(stale), since),
        engagement=None,
        subject=f"[Tollgate] Tollgate has gone silent: {', '.join(sorted(stale))} stale",
        body=_silence_message(stale),
    )
    if alert is not None and alert.delivered_at is None:
        if not alert_deliver(alert_id=alert.pk):
            _await_delivery_in_progress(alert.pk)
        alert.refresh_from_db()
    return alert


def _await_delivery_in_progress(alert_id: int) -> None:
    """A live worker may have taken the alert (poked when it was enqueued) and hold its row while
    it talks to the mail server: wait for that to commit, so the caller reports what happened
    rather than "not yet sent" for a message on its way. Bounded by the mail server's timeout."""
    with transaction.atomic():
        list(Alert.objects.select_for_update(of=("self",)).filter(pk=alert_id).values("pk"))


def _silence_message(stale: list[str]) -> str:
    lines = ["Tollgate has gone silent.", ""]
    for check in heartbeat_checks():
        if check.name in stale:
            age = "never" if check.age_s is None else f"{check.age_s:.0f} s ago"
            lines.append(f"- {check.name}: last heartbeat {age} (limit {check.limit_s} s)")
    lines += [
        "",
        "Runs are not advanced, alerts are not delivered and stale runs are not reaped until "
        "it is back. Restart the stale services; see docs/alerts.md.",
    ]
    return "\n".join(lines)
