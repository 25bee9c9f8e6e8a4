"""The events services raise as alerts: a gate's verdict (fail, stop-loss review opened,
inconclusive, invalid, infra error), a run that ended without one, a host whose key changed,
stop-loss decisions. Each key derives from the row that caused it, so raising twice is once."""

from __future__ import annotations

from gates.alerts import events
from gates.models import Decision, Engagement, Gate, Host, Run, Verdict
from gates.services.alerts.outbox import alert_enqueue
from gates.services.contract.power import spec_acknowledgement_line
from runners.errors import HOST_KEY_CHANGED

GATE_VERDICT_WORDS = {
    Verdict.INCONCLUSIVE: "was inconclusive",
    Verdict.INVALID: "was invalid",
    Verdict.INFRA_ERROR: "hit an infrastructure error",
}


def _alert_review_opened(gate: Gate, decision: Decision) -> None:
    words = GATE_VERDICT_WORDS.get(decision.verdict, decision.verdict)
    alert_enqueue(
        event="stop_loss_review",
        key=events.decision_key(decision.pk),
        engagement=gate.engagement,
        gate=gate,
        run=decision.runs.first(),
        decision=decision,
        subject=f"[Tollgate] {gate.engagement.title}: {gate.kind} {words} - stop-loss review",
        context=_gate_context(gate, decision, verdict_words=words),
    )


def alert_gate_failed(gate: Gate, decision: Decision, failures: int, max_attempts: int) -> None:
    review = gate.stop_loss_review
    subject = f"[Tollgate] {gate.engagement.title}: {gate.kind} failed" + (
        " - stop-loss review" if review else f" (attempt {failures} of {max_attempts})"
    )
    alert_enqueue(
        event="stop_loss_review" if review else "gate_failed",
        key=events.decision_key(decision.pk),
        engagement=gate.engagement,
        gate=gate,
        run=decision.runs.first(),
        decision=decision,
        subject=subject,
        context=_gate_context(
            gate, decision, verdict_words="failed", failures=failures, max_attempts=max_attempts
        ),
    )


def alert_gate_verdict(gate: Gate, decision: Decision) -> None:
    """Inconclusive, invalid, infra error: each switchable per engagement and per person. One
    that spent the gate's last attempt opened the stop-loss review: that is the news, raised as
    the review (critical, never muted), not as a verdict a person may have switched off."""
    if gate.stop_loss_review:
        _alert_review_opened(gate, decision)
        return
    event = events.VERDICT_EVENTS.get(decision.verdict)
    if event is None:
        return
    alert_enqueue(
        event=event,
        key=events.verdict_key(event, decision.pk),
        engagement=gate.engagement,
        gate=gate,
        run=decision.runs.first(),
        decision=decision,
        subject=f"[Tollgate] {gate.engagement.title}: {gate.kind} "
        f"{GATE_VERDICT_WORDS[decision.verdict]}",
        context=_gate_context(gate, decision),
    )


def alert_run_error(run: Run, outcome: str, reason: str) -> None:
    gate = run.gate
    if HOST_KEY_CHANGED in reason and run.host is not None:
        _alert_host_key_changed(run, run.host, reason)
    alert_enqueue(
        event="run_error",
        key=events.run_error_key(run.pk),
        engagement=gate.engagement,
        gate=gate,
        run=run,
        subject=f"[Tollgate] {gate.engagement.title}: {gate.kind} run #{run.attempt} {outcome}",
        context={"gate": gate, "run": run, "outcome": outcome, "reason": reason[:2000]},
    )


def _alert_host_key_changed(run: Run, host: Host, reason: str) -> None:
    engagement = run.gate.engagement
    alert_enqueue(
        event="host_key_changed",
        key=events.host_key_changed_key(host.pk, host.host_key),
        engagement=engagement,
        gate=run.gate,
        run=run,
        subject=f"[Tollgate] {engagement.title}: host {host.name} offered a different host key",
        context={"host": host, "run": run, "reason": reason[:2000]},
    )


def alert_review_decision(
    engagement: Engagement, gate: Gate, action: str, who: str, justification: str
) -> None:
    verb = "waived" if action == "gate.waive" else "stopped the engagement at"
    alert_enqueue(
        event=action.replace(".", "_"),
        key=events.review_key(action, gate.pk),
        engagement=engagement,
        gate=gate,
        subject=f"[Tollgate] {engagement.title}: {who} {verb} {gate.kind}",
        context={"gate": gate, "who": who, "verb": verb, "justification": justification},
    )


def _gate_context(gate: Gate, decision: Decision, **more) -> dict:
    return {
        "gate": gate,
        "decision": decision,
        "review": gate.stop_loss_review,
        # Read only when the review opens, so the other verdicts' alerts cost no extra query.
        "acknowledged": spec_acknowledgement_line(decision.spec) if gate.stop_loss_review else "",
        "failed_clauses": [
            {
                "name": c.get("metric") or c.get("check") or "check",
                "tier": c.get("tier"),
                "cause": c.get("cause") or "below threshold",
            }
            for c in decision.clauses
            if isinstance(c, dict) and c.get("verdict") == Verdict.FAIL
        ],
        **more,
    }
