"""Runs: creating and canceling them, leasing hosts, ending them, and recording decisions.
Every run state change and decision is written here, but the worker's claim (recording.py
RunSession.claim_dispatched); steps, progress and heartbeats are in recording.py and uploads.py.
A decision and a lease release check the fencing token: a run that lost its lease never writes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Max, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from gates.decisions import stop_loss_review
from gates.errors import (
    HostBusyError,
    IllegalTransitionError,
    LeaseLostError,
    NotAllowedError,
    ServiceError,
)
from gates.models import Decision, Engagement, Gate, Host, Run, RunStep, Verdict
from gates.selectors import gate_counted_decisions
from gates.services import pokes
from gates.services.alerts.events import alert_gate_failed, alert_gate_verdict, alert_run_error
from gates.services.audit import Actor, audit_record
from gates.services.contract.power import gate_check_power
from gates.services.engagements import gate_move, gate_open_next
from gates.services.hosts.access import UploadProfile, run_profile_fields, run_values_check
from gates.services.hosts.cleanup import host_require_clean
from gates.services.reports import report_pdf_at_decision
from gates.services.runs.attempts import (
    gate_attempts_exhausted,
    gate_check_attempts_left,
    run_attempt_at_cancel,
)
from gates.services.runs.carrying import carry_audit, carry_fields, g3_carry
from gates.services.runs.readouts import gate_readout_refresh
from gates.tenancy import Viewer
from runners.program.sequence import has_program

ACTIVE_STATES = (Run.State.QUEUED, Run.State.RUNNING)


class GateNotRunnableError(ServiceError):
    """No program runs this kind of gate yet, so a run of it could never end in a verdict."""

    code = "not_runnable"
    status = 409


def run_create(
    *,
    actor: Actor,
    viewer: Viewer,
    gate: Gate,
    host: Host | None,
    # A labelled TextChoices member is a (value, label) tuple to mypy without django-stubs.
    source: str = Run.Source.REMOTE,  # type: ignore[assignment]
    upload: UploadProfile | None = None,
) -> Run:
    """Queue a run of the gate's current spec; the host is leased at once or the call fails.
    An upload run may name the profile its person ran (`upload`), kept as a host run's is."""
    if not viewer.can("run.start"):
        raise NotAllowedError("you may not start runs")
    with transaction.atomic():
        gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
        _check_can_start(gate, host, source)
        profile = run_profile_fields(host, gate, upload)  # as this run uses it, kept with it
        carry = g3_carry(gate, host, profile)
        spec = gate.current_spec
        attempt = (gate.runs.aggregate(top=Max("attempt"))["top"] or 0) + 1
        uploaded = source == Run.Source.UPLOAD
        run = Run.objects.create(
            gate=gate,
            spec=spec,
            host=host,
            attempt=attempt,
            # Signed by both at the start or it never counts: a later signature does not
            # turn a run measured against an unagreed bar into a counted one.
            rehearsal=not spec.in_force,
            source=source,
            requested_by=actor.user,
            # A person uploads results over days: no worker claims it, so it starts running.
            state=Run.State.RUNNING if uploaded else Run.State.QUEUED,
            started_at=timezone.now() if uploaded else None,
            **profile,
            **carry_fields(carry),
        )
        if spec.frozen_at is None:
            spec.frozen_at = timezone.now()
            spec.save(update_fields=["frozen_at"])
        if host is not None:
            run.lease_token = host_lease_acquire(run=run)
            run.save(update_fields=["lease_token"])
        gate_move(gate, Gate.State.RUNNING)
        audit_record(
            actor=actor,
            action="run.create",
            target=run,
            organization_id=gate.engagement.organization_id,
            detail={
                "gate": gate.kind,
                "attempt": attempt,
                "host": host and host.name,
                "spec_version": spec.version,
                "rehearsal": run.rehearsal,
                "source": source,
                **carry_audit(carry),
            },
        )
        if source == Run.Source.REMOTE:
            _dispatch_on_commit(run)
        if gate.kind == "G3":  # seconds to a minute of the model: its own task, never the run's
            pokes.poke_on_commit(pokes.PREDICT_RUN_TTFT, run.pk)
    return run


def _check_can_start(gate: Gate, host: Host | None, source: str) -> None:
    if not has_program(gate.kind):
        # Uploads too: no engine input is gathered for a gate without a program.
        raise GateNotRunnableError(
            f"{gate.kind} cannot be run yet: Tollgate has no {gate.kind} program, on a host or "
            "by upload",
            field="gate",
        )
    if gate.kind == "G4" and source == Run.Source.UPLOAD:
        raise GateNotRunnableError(
            "a G4 soak is run on a host by its agent; it cannot be uploaded", field="upload"
        )
    if gate.engagement.state != Engagement.State.ACTIVE:
        raise IllegalTransitionError(f"the engagement is {gate.engagement.state}")
    if gate.state == Gate.State.RUNNING:
        raise IllegalTransitionError(f"{gate.kind} already has an active run", field="gate")
    if not gate.can_move_to(Gate.State.RUNNING):
        raise IllegalTransitionError(
            f"{gate.kind} is {gate.state}"
            + (" (stop-loss review)" if gate.stop_loss_review else ""),
            field="gate",
        )
    gate_check_attempts_left(gate)
    gate_check_power(gate)
    if source == Run.Source.REMOTE and host is None:
        raise ServiceError("a run on a host needs a host", field="host")
    if host is not None and host.organization_id != gate.engagement.organization_id:
        raise ServiceError("the host belongs to another organization", field="host")
    if host is not None and source == Run.Source.REMOTE:
        run_values_check(host, gate.current_spec.document, model_name=gate.engagement.model_name)


def _dispatch_on_commit(run: Run) -> None:
    pokes.poke_on_commit(pokes.ADVANCE_RUN, run.pk)


def host_lease_acquire(*, run: Run) -> int:
    """Give `run` the lease on its host and return the new fencing token. A host with a
    pending cleanup is refused: an earlier run's server may still hold its port."""
    host_require_clean(run.host_id)
    free = Q(lease_run__isnull=True) | Q(lease_run=run) | Q(lease_run__state__in=Run.ENDED)
    changed = Host.objects.filter(free, pk=run.host_id).update(
        lease_run=run, lease_acquired_at=timezone.now(), fencing_token=F("fencing_token") + 1
    )
    if changed != 1:
        holder = Host.objects.filter(pk=run.host_id).values_list("lease_run", flat=True).first()
        raise HostBusyError(
            f"host is leased by run {holder}; one run per host at a time", field="host"
        )
    return Host.objects.values_list("fencing_token", flat=True).get(pk=run.host_id)


def host_lease_release(*, run: Run) -> bool:
    """Release the lease if `run` still holds it with its own fencing token."""
    if run.host_id is None:
        return False
    released = Host.objects.filter(
        pk=run.host_id, lease_run=run, fencing_token=run.lease_token
    ).update(lease_run=None, lease_acquired_at=None)
    return released == 1


def run_assert_lease(run: Run) -> None:
    """Raise LeaseLostError unless `run` holds its host's lease with its fencing token."""
    if run.host_id is None:
        return
    held = Host.objects.filter(
        pk=run.host_id, lease_run=run, fencing_token=run.lease_token
    ).exists()
    if not held:
        raise LeaseLostError(f"run {run.pk} no longer holds the lease on its host")


def run_claim(*, run_id: int) -> Run | None:
    """queued -> running; returns None when someone else claimed it or it ended."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, state=Run.State.QUEUED).update(
        state=Run.State.RUNNING, started_at=now, heartbeat_at=now
    )
    return Run.objects.get(pk=run_id) if claimed == 1 else None


def run_fail(*, run_id: int, outcome: str, reason: str) -> Run | None:
    """End a run without a verdict (infrastructure, spec, benchmark or internal error)."""
    if outcome in ("", Run.Outcome.COMPLETED):
        raise ValueError("run_fail needs a failure outcome")
    with transaction.atomic():
        run = _lock_active(run_id)
        if run is None:
            return None
        _end(run, Run.State.FINISHED, outcome, reason)
        _gate_after_run_without_verdict(run.gate)
        audit_record(
            actor=Actor.system("worker"),
            action="run.fail",
            target=run,
            organization_id=run.gate.engagement.organization_id,
            detail={"outcome": outcome, "reason": reason[:500]},
        )
        if outcome in (Run.Outcome.INFRA_ERROR, Run.Outcome.INTERNAL_ERROR):
            alert_run_error(run, outcome, reason)
    return run


MIN_CANCEL_REASON_CHARS = 10


def run_cancel(*, actor: Actor, viewer: Viewer, run: Run, reason: str) -> Run:
    """Cancel a run, saying why: a queued run ends at once; a running one is stopped by its
    worker. A G3 run with a complete repetition has spent its attempt's share of the error
    budget all the same (gates.services.runs.attempts), and its repetitions stay on record."""
    if not viewer.can("run.cancel"):
        raise NotAllowedError("you may not cancel runs")
    reason = " ".join((reason or "").split())
    if len(reason) < MIN_CANCEL_REASON_CHARS:
        raise ServiceError(
            f"say why the run is canceled, in at least {MIN_CANCEL_REASON_CHARS} characters "
            "(it is kept with the run and in the audit log)",
            field="reason",
        )
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("gate__engagement").get(pk=run.pk)
        detail = {"state_before": run.state, "reason": reason[:500], **run_attempt_at_cancel(run)}
        if run.state == Run.State.QUEUED or (run.state == Run.State.RUNNING and not run.host_id):
            _end(run, Run.State.CANCELED, "", f"canceled before it started: {reason}")
            _gate_after_run_without_verdict(run.gate)
        elif run.state == Run.State.RUNNING and run.cancel_requested_at is None:
            run.cancel_requested_at = timezone.now()
            run.cancel_reason = reason[:500]
            run.save(update_fields=["cancel_requested_at", "cancel_reason"])
            _dispatch_on_commit(run)
        else:
            detail["ignored"] = "already ended or cancel already requested"
        audit_record(
            actor=actor,
            action="run.cancel",
            target=run,
            organization_id=run.gate.engagement.organization_id,
            detail=detail,
        )
    return run


def run_mark_canceled(*, run_id: int, reason: str = "canceled") -> Run | None:
    """The worker stopped the remote work of a run whose cancel was requested."""
    with transaction.atomic():
        run = _lock_active(run_id)
        if run is None:
            return None
        asked = f"canceled: {run.cancel_reason}; " if run.cancel_reason else ""
        _end(run, Run.State.CANCELED, "", asked + reason)
        _gate_after_run_without_verdict(run.gate)
    return run


def decision_record(*, run_id: int, result: Mapping[str, Any]) -> Decision | None:
    """Store the engine's verdict for a run and move the gate on. None if the run ended."""
    with transaction.atomic():
        run = _lock_active(run_id)
        if run is None:
            return None
        run_assert_lease(run)
        gate = Gate.objects.select_for_update().get(pk=run.gate_id)
        decision = Decision.objects.create(
            gate=gate,
            spec=run.spec,
            kind=Decision.Kind.ENGINE,
            verdict=result["verdict"],
            rehearsal=run.rehearsal,
            clauses=result.get("clauses", []),
            result=result,
            decided_by_system=result.get("engine", "tollgate decision engine"),
        )
        decision.runs.add(run)
        report_pdf_at_decision(decision)
        gate_readout_refresh(gate.pk)
        _end(run, Run.State.FINISHED, Run.Outcome.COMPLETED, "")
        if decision.rehearsal:
            # Recorded and shown, but the gate keeps its counted verdict and nothing opens.
            _gate_after_run_without_verdict(gate)
        else:
            gate.verdict = decision.verdict
            gate.decided_at = decision.created_at
            gate_move(gate, Gate.State.DECIDED)
            gate.save(update_fields=["verdict", "decided_at"])
            _after_verdict(gate, decision)
        audit_record(
            actor=Actor.system("decision-engine"),
            action="gate.rehearse" if decision.rehearsal else "gate.decide",
            target=gate,
            organization_id=gate.engagement.organization_id,
            detail={"verdict": decision.verdict, "run": run.pk, "decision": decision.pk},
        )
    return decision


def _after_verdict(gate: Gate, decision: Decision) -> None:
    if decision.verdict == Verdict.PASS:
        gate_open_next(gate)
        return
    if decision.verdict != Verdict.FAIL:
        if gate_attempts_exhausted(gate, decision.spec.document):
            gate.stop_loss_review = True
            gate.save(update_fields=["stop_loss_review"])
        alert_gate_verdict(gate, decision)
        return
    # Every counted attempt since the last reset both parties signed, whatever spec version
    # it ran on: a new version does not wipe the failures of the old one.
    verdicts = list(gate_counted_decisions(gate).values_list("verdict", flat=True))
    max_attempts = decision.spec.document.get("stop_loss", {}).get("max_attempts", 1)
    review = stop_loss_review(verdicts, max_attempts)
    if review["review"] or gate_attempts_exhausted(gate, decision.spec.document):
        gate.stop_loss_review = True
        gate.save(update_fields=["stop_loss_review"])
    alert_gate_failed(gate, decision, review["failures"], max_attempts)


def runs_stale(*, older_than_s: int) -> list[int]:
    """Active runs whose last sign of life is older than the limit (never-heartbeated too)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    last_seen = Coalesce("heartbeat_at", "started_at", "created_at")
    # Uploaded runs wait on a person, not a worker: they never go stale.
    # A soak handed to its collector is watched by the beat ticks, which end it themselves.
    driven = Run.objects.filter(state=Run.State.RUNNING, source=Run.Source.REMOTE, soak=None)
    stale = driven.alias(seen=last_seen).filter(seen__lt=cutoff)
    return list(stale.values_list("id", flat=True))


def runs_to_redispatch(*, older_than_s: int) -> list[int]:
    """Active remote runs nobody has poked lately (a lost broker message, a dead worker)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    quiet = Run.objects.filter(state__in=ACTIVE_STATES, source=Run.Source.REMOTE, soak=None)
    quiet = quiet.filter(Q(last_dispatched_at__isnull=True) | Q(last_dispatched_at__lt=cutoff))
    return list(quiet.values_list("id", flat=True))


def runs_due_for_retry() -> list[int]:
    """Runs riding out an outage whose next try is due and that nobody poked since."""
    now = timezone.now()
    due = Run.objects.filter(state=Run.State.RUNNING, outage_retry_at__lte=now).filter(
        Q(last_dispatched_at__isnull=True) | Q(last_dispatched_at__lt=F("outage_retry_at"))
    )
    return list(due.values_list("id", flat=True))


def _lock_active(run_id: int) -> Run | None:
    return (
        Run.objects.select_for_update()
        .select_related("gate__engagement", "spec")
        .filter(pk=run_id, state__in=ACTIVE_STATES)
        .first()
    )


def _end(run: Run, state: str, outcome: str, reason: str) -> None:
    host_lease_release(run=run)
    run.state = state
    run.outcome = outcome
    run.reason = reason[:5000]
    run.finished_at = timezone.now()
    run.save(update_fields=["state", "outcome", "reason", "finished_at"])
    if outcome != Run.Outcome.COMPLETED:
        # The step under way ends with the run: a canceled run must not show it "started".
        cut = RunStep.State.CANCELED if state == Run.State.CANCELED else RunStep.State.FAILED
        run.steps.filter(state=RunStep.State.STARTED).update(state=cut, finished_at=run.finished_at)


def _gate_after_run_without_verdict(gate: Gate) -> None:
    gate = Gate.objects.select_for_update().get(pk=gate.pk)
    if gate.state != Gate.State.RUNNING:
        return
    decided_before = gate.decisions.filter(kind=Decision.Kind.ENGINE, rehearsal=False).exists()
    gate_move(gate, Gate.State.DECIDED if decided_before else Gate.State.READY)
    # A canceled or broken G3 run with a complete repetition spent an attempt: the last one spent
    # without a pass opens stop-loss review as a spent inconclusive does.
    if not gate.stop_loss_review and gate_attempts_exhausted(gate, gate.current_spec.document):
        gate.stop_loss_review = True
        gate.save(update_fields=["stop_loss_review"])
