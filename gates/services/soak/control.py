"""A person's control over a running soak: stop it early, or extend it by N hours before its
end. Both are audited; an extension is recorded on the soak and judged as part of the spec in
force (gates.services.soak.verdict.soak_spec_in_force). The collector passes either on to the
agent."""

from __future__ import annotations

import math

from django.db import transaction

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError
from gates.models import Run, Soak
from gates.services.audit import Actor, audit_record
from gates.tenancy import Viewer

MAX_EXTENSION_H = 168


def soak_stop(*, actor: Actor, viewer: Viewer, run: Run, reason: str = "") -> Soak:
    """Ask the agent to stop after its current window; what it recorded is then decided."""
    if not viewer.can("soak.control"):
        raise NotAllowedError("you may not stop soaks")
    with transaction.atomic():
        soak = _lock_active(run)
        said = reason.strip()[:500] or "no reason given"
        soak.state = Soak.State.STOPPING
        who = getattr(actor.user, "username", None) or actor.label or "someone"
        soak.stop_reason = f"stopped early by {who}: {said}"
        soak.save(update_fields=["state", "stop_reason"])
        _audit(actor, soak, "soak.stop", {"reason": said})
    return soak


def soak_extend(*, actor: Actor, viewer: Viewer, run: Run, hours: object) -> Soak:
    """Move the soak's end N hours later; only before the end, and never shorter."""
    if not viewer.can("soak.control"):
        raise NotAllowedError("you may not extend soaks")
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not math.isfinite(hours):
        raise ServiceError("must be a number of hours", field="hours")
    if not 0 < hours <= MAX_EXTENSION_H:
        raise ServiceError(f"must be more than 0 and at most {MAX_EXTENSION_H}", field="hours")
    with transaction.atomic():
        soak = _lock_active(run)
        if soak.deadline is None:
            raise IllegalTransitionError("the soak has not started its clock yet", field="hours")
        base = soak.deadline_wanted or soak.deadline
        soak.deadline_wanted = base + hours * 3600
        soak.extended_h += hours
        soak.save(update_fields=["deadline_wanted", "extended_h"])
        _audit(actor, soak, "soak.extend", {"hours": hours, "extended_h": soak.extended_h})
    return soak


def _lock_active(run: Run) -> Soak:
    soak = (
        Soak.objects.select_for_update()
        .select_related("run__gate__engagement")
        .filter(run_id=run.pk)
        .first()
    )
    if soak is None:
        raise IllegalTransitionError("this run is not a running soak", field="run")
    if soak.state != Soak.State.ACTIVE or soak.run.is_ended:
        raise IllegalTransitionError(f"the soak is {soak.state}", field="run")
    return soak


def _audit(actor: Actor, soak: Soak, action: str, detail: dict) -> None:
    audit_record(
        actor=actor,
        action=action,
        target=soak.run,
        organization_id=soak.run.gate.engagement.organization_id,
        detail=detail,
    )
