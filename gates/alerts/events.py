"""PURE: the alertable events, how loud each one is, and the idempotency keys they derive
from their cause. Imports no framework: the services and the pages both read it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class EventKind:
    name: str
    title: str
    # Critical alerts are re-sent to the wider list until someone acknowledges them.
    critical: bool = False
    # Switchable events can be turned off per engagement and muted per person.
    switchable: bool = False


EVENTS: dict[str, EventKind] = {
    kind.name: kind
    for kind in (
        EventKind("gate_failed", "gate failed", critical=True),
        EventKind("stop_loss_review", "stop-loss review opened", critical=True),
        EventKind("gate_inconclusive", "gate inconclusive", switchable=True),
        EventKind("gate_invalid", "gate invalid", switchable=True),
        EventKind("gate_infra_error", "gate infrastructure error", switchable=True),
        EventKind("gate_waive", "gate waived"),
        EventKind("engagement_stop", "engagement stopped"),
        EventKind("run_error", "run ended without a verdict"),
        EventKind("host_key_changed", "host key changed", critical=True),
        EventKind("soak_crash", "soak crash", critical=True),
        EventKind("soak_early_stop", "soak stopped early"),
        EventKind("soak_provisional_change", "soak provisional verdict changed"),
        EventKind("spec_proposed", "spec version proposed"),
        EventKind("inventory_proposed", "amended host inventory proposed"),
        EventKind("orchestrator_silent", "Tollgate has gone silent", critical=True),
    )
}
SWITCHABLE = tuple(name for name, kind in EVENTS.items() if kind.switchable)
# The verdicts that raise their own switchable event (a fail raises gate_failed).
VERDICT_EVENTS = {
    "inconclusive": "gate_inconclusive",
    "invalid": "gate_invalid",
    "infra_error": "gate_infra_error",
}


def event_kind(name: str) -> EventKind:
    """The catalogue entry; an event nobody listed yet (a caller ahead of the catalogue) is
    alerted as a plain, unswitchable, non-critical one rather than lost."""
    return EVENTS.get(name) or EventKind(name, name.replace("_", " "))


def is_critical(name: str) -> bool:
    return event_kind(name).critical


def decision_key(decision_id: int) -> str:
    # The historical key of a gate failure: kept so rows written before stay unique.
    return f"gate_failed:{decision_id}"


def verdict_key(event: str, decision_id: int) -> str:
    return f"{event}:{decision_id}"


def review_key(action: str, gate_id: int) -> str:
    return f"{action}:{gate_id}"


def run_error_key(run_id: int) -> str:
    return f"run_error:{run_id}"


def host_key_changed_key(host_id: int, pinned_key: str) -> str:
    """Once per host and pinned key: every run refused by the same change is one alert, and
    a re-pinned key that changes again is a new one."""
    digest = hashlib.sha256(pinned_key.encode()).hexdigest()[:16]
    return f"host_key_changed:{host_id}:{digest}"


def silence_key(stale: tuple[str, ...], since_epoch_s: int) -> str:
    """One alert per silence: the same stale set since the same last heartbeat."""
    return f"orchestrator_silent:{'+'.join(sorted(stale))}:{since_epoch_s}"


def escalation_key(root_key: str, level: int) -> str:
    return f"{root_key}#escalation:{level}"


def webhook_key(root_key: str, endpoint_id: int) -> str:
    return f"{root_key}#webhook:{endpoint_id}"
