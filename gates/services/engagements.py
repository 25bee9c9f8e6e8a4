"""Engagements and gate progression: creating them with version-1 specs, opening gates,
stop-loss review. Spec versions and signatures are in contract.py."""

from __future__ import annotations

from datetime import date

from django.db import transaction

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError
from gates.models import Decision, Engagement, Gate, GateSpec, Organization
from gates.services.alerts.events import alert_review_decision
from gates.services.audit import Actor, audit_record
from gates.services.reports import report_pdf_at_decision
from gates.services.runs.readouts import gate_readout_refresh
from gates.specs import validation as specs
from gates.specs.schema import GATE_KINDS
from gates.tenancy import Viewer

MIN_JUSTIFICATION_CHARS = 20


def engagement_create(
    *,
    actor: Actor,
    organization: Organization,
    title: str,
    model_name: str,
    platform: str = "",
    planned_start: date | None = None,
) -> Engagement:
    """Create an engagement with its four gates, each with the default spec as version 1."""
    if organization.kind != Organization.Kind.CUSTOMER:
        raise ServiceError("an engagement belongs to a customer organization", field="organization")
    if not title.strip():
        raise ServiceError("a title is required", field="title")
    with transaction.atomic():
        engagement = Engagement.objects.create(
            organization=organization,
            title=title.strip(),
            model_name=model_name.strip(),
            platform=platform,
            planned_start=planned_start,
            created_by=actor.user,
        )
        for position, kind in enumerate(GATE_KINDS, start=1):
            gate = Gate.objects.create(
                engagement=engagement,
                kind=kind,
                position=position,
                state=Gate.State.READY if position == 1 else Gate.State.LOCKED,
            )
            document = specs.default_spec(kind)
            GateSpec.objects.create(
                gate=gate,
                version=1,
                document=document,
                digest=specs.spec_digest(document),
                created_by=actor.user,
            )
            gate_readout_refresh(gate.pk)
        audit_record(
            actor=actor,
            action="engagement.create",
            target=engagement,
            organization_id=organization.id,
            detail={"title": engagement.title},
        )
    return engagement


def gate_move(gate: Gate, state: str) -> None:
    """Move a locked (select_for_update) gate to `state`, refusing illegal transitions."""
    if gate.state == state:
        return
    if not gate.can_move_to(state):
        raise IllegalTransitionError(
            f"{gate.kind} cannot go from {gate.state} to {state}", field="state"
        )
    gate.state = state
    gate.save(update_fields=["state"])


def gate_open_next(gate: Gate) -> None:
    """After a pass or a waiver: unlock the next gate, or mark the engagement passed."""
    following = (
        Gate.objects.select_for_update()
        .filter(engagement_id=gate.engagement_id, position=gate.position + 1)
        .first()
    )
    if following is not None:
        gate_move(following, Gate.State.READY)
        return
    Engagement.objects.filter(pk=gate.engagement_id, state=Engagement.State.ACTIVE).update(
        state=Engagement.State.PASSED
    )


def gate_waive(*, actor: Actor, viewer: Viewer, gate: Gate, justification: str) -> Decision:
    """A vendor admin waives a gate (typically at stop-loss review), with a written reason."""
    _require_review_rights(viewer, justification)
    with transaction.atomic():
        gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
        _require_active(gate.engagement)
        gate_move(gate, Gate.State.WAIVED)
        # A labelled TextChoices member is a (value, label) tuple to mypy without django-stubs.
        decision = _close_review(actor, gate, Decision.Kind.WAIVER, justification)  # type: ignore[arg-type]
        gate_open_next(gate)
        _audit_and_alert_review(actor, gate, "gate.waive", justification)
    return decision


def engagement_stop(*, actor: Actor, viewer: Viewer, gate: Gate, justification: str) -> Decision:
    """Stop-loss: a vendor admin ends the engagement at a failed gate."""
    _require_review_rights(viewer, justification)
    with transaction.atomic():
        gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
        engagement = gate.engagement
        _require_active(engagement)
        if gate.runs.filter(state__in=["queued", "running"]).exists():
            raise IllegalTransitionError("cancel the gate's active run before stopping")
        engagement.state = Engagement.State.STOPPED
        engagement.state_reason = justification.strip()
        engagement.save(update_fields=["state", "state_reason"])
        # A labelled TextChoices member is a (value, label) tuple to mypy without django-stubs.
        decision = _close_review(actor, gate, Decision.Kind.STOP, justification)  # type: ignore[arg-type]
        _audit_and_alert_review(actor, gate, "engagement.stop", justification)
    return decision


def _close_review(actor: Actor, gate: Gate, kind: str, justification: str) -> Decision:
    """End stop-loss review on a locked gate with the admin's decision, kept for good."""
    gate.stop_loss_review = False
    gate.save(update_fields=["stop_loss_review"])
    decision = Decision.objects.create(
        gate=gate,
        spec=gate.current_spec,
        kind=kind,
        verdict=gate.verdict,
        decided_by=actor.user,
        justification=justification.strip(),
    )
    # A waiver or a stop is not an engine decision, so the read does not change today; the
    # refresh keeps "every decision refreshes" true whatever gate_readout comes to include.
    gate_readout_refresh(gate.pk)
    report_pdf_at_decision(decision)
    return decision


def _require_review_rights(viewer: Viewer, justification: str) -> None:
    if not viewer.can("gate.review"):
        raise NotAllowedError("only a vendor admin may stop an engagement or waive a gate")
    if len(justification.strip()) < MIN_JUSTIFICATION_CHARS:
        raise ServiceError(
            f"write a justification of at least {MIN_JUSTIFICATION_CHARS} characters",
            field="justification",
        )


def _require_active(engagement: Engagement) -> None:
    if engagement.state != Engagement.State.ACTIVE:
        raise IllegalTransitionError(f"the engagement is {engagement.state}", field="state")


def _audit_and_alert_review(actor: Actor, gate: Gate, action: str, justification: str) -> None:
    audit_record(
        actor=actor,
        action=action,
        target=gate,
        organization_id=gate.engagement.organization_id,
        detail={"gate": gate.kind, "justification": justification.strip()},
    )
    who = actor.user.get_username() if actor.user else actor.label
    alert_review_decision(gate.engagement, gate, action, who, justification.strip())
