"""`{% service_banner %}`: the banner every signed-in page shows while the worker, the beat, the
broker or the cache is down, so a run that sits still is never a silent failure. I/O: reads the
heartbeat rows (gates.services.heartbeats) and probes the broker as /healthz does (gates.healthz),
the probe kept for a few seconds so a down broker slows one page in a while, not every page.
"""

from __future__ import annotations

import time
from datetime import datetime

from django import template

from gates import healthz, services
from gates.cache import cache_degraded
from gates.pages.formatting import duration, moment

register = template.Library()
BROKER_PROBE_KEEP_S = 15.0
_broker_probe: dict[str, float | str | None] = {"at": None, "error": None}

# What each part does for a reader, so the banner says what they will see go wrong.
CONSEQUENCES = {
    "worker": "runs do not start or move and no verdict is decided",
    "beat": "soaks are not collected, stalled runs are not noticed and alerts are not sent",
    "broker": "new runs cannot be queued",
    "cache": "pages work but are slower",
}
NAMES = {
    "worker": "The worker",
    "beat": "The scheduler (beat)",
    "broker": "The queue (broker)",
    "cache": "The cache",
}


def service_problems(checks: list | None = None) -> list[dict[str, str]]:
    """One entry per part that is down: its name, since when, and what that breaks."""
    problems = []
    if checks is None:
        try:
            checks = services.heartbeat_checks()
        except Exception:  # the database is down: the page itself would not render
            checks = []
    for check in checks:
        if not check.ok:
            since = (
                "has never reported"
                if check.age_s is None
                else (f"has not reported for {duration(check.age_s)}")
            )
            problems.append(_problem(check.name, since))
    if broker_error():
        problems.append(_problem("broker", "is unreachable"))
    if cache_degraded():
        problems.append(_problem("cache", "is unreachable"))
    return problems


def _problem(part: str, since: str) -> dict[str, str]:
    return {"part": part, "text": f"{NAMES[part]} {since}: {CONSEQUENCES[part]}."}


def broker_error() -> str | None:
    """The broker probe's error ("" or None when it answered), at most every few seconds."""
    at = _broker_probe["at"]
    if not isinstance(at, float) or time.monotonic() - at > BROKER_PROBE_KEEP_S:
        check = healthz._probe(healthz._broker, required=True)
        _broker_probe.update(at=time.monotonic(), error=check.error)
    error = _broker_probe["error"]
    return error if isinstance(error, str) else None


def service_restarts(restarts: dict[str, str]) -> list[dict[str, str]]:
    """Parts a supervisor (the demo's) started again after they died, within the last
    TOLLGATE_RESTART_SHOWN_S: said once on every page, so a gap in a soak or a run that paused
    has its reason in plain sight."""
    return [
        {
            "part": part,
            "text": f"{NAMES.get(part, part)} stopped and was started again by its supervisor "
            f"at {moment(datetime.fromisoformat(at))}: work it was doing resumed.",
        }
        for part, at in sorted(restarts.items())
    ]


@register.inclusion_tag("_service_banner.html", takes_context=True)
def service_banner(context) -> dict:
    user = getattr(context.get("request"), "user", None)
    signed_in = bool(user and user.is_authenticated)
    if not signed_in:
        return {"problems": [], "restarts": []}
    try:
        checks, restarts = services.heartbeat_state()  # one query for both
    except Exception:  # the database is down: the page itself would not render
        checks, restarts = [], {}
    return {"problems": service_problems(checks), "restarts": service_restarts(restarts)}


def broker_probe_forget() -> None:
    """Probe the broker again on the next page (tests, and after an operator fixed it)."""
    _broker_probe.update(at=None, error=None)
