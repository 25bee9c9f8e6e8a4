"""A G3 gate's attempts: how many have spent its error budget, refusing one beyond the spec's
cap, and what the engine needs to know (which attempt, the G2 noise floor). Power before a run
is gates.services.contract.power.

The spec splits its error budget across `statistics.attempts` (docs/decisions.md), and the
rule is the engine's (`gates.decisions.statistics.budget`): an attempt spends its share once it
reached a clause verdict (pass, fail or inconclusive), or once its run has one complete
repetition whatever ended it afterwards (canceled, invalid, infra_error, reaped): measurements
are shown as the run goes, so a cancel on weak interim numbers, before the first look too, must
not buy a fresh draw. A run that ended with no complete repetition showed no data and spends
nothing. A rehearsal (a run on a version not yet signed by both parties) counts for
nothing, so it spends nothing: its data never feeds a counted verdict. A signed stop-loss reset
starts the count again.
"""

from __future__ import annotations

from django.db.models import Count

from gates.decisions.statistics.budget import attempt_spent
from gates.errors import ServiceError
from gates.models import Decision, Gate, Measurement, Run, Verdict
from gates.selectors import engagement_noise_floor, gate_last_reset_at

SPENDING = (Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE)


class AttemptsSpentError(ServiceError):
    """The spec's attempts are spent: another run could only pass by luck."""

    code = "attempts_spent"
    status = 409


def gate_attempts_spent(gate: Gate) -> int:
    """Counted attempts of this gate (no rehearsals, none before the last reset) that spent
    their share of the error budget. A fixed number of queries however many runs it has (the
    engagement and gate pages show it)."""
    runs = list(_counted_runs(gate))
    decided = _runs_with_spending_verdicts([run.pk for run in runs])
    judged = [run for run in runs if run.pk not in decided and _may_spend_unjudged(run)]
    complete = _complete_repetitions(judged)
    return len(decided & {run.pk for run in runs}) + sum(
        attempt_spent(complete.get(run.pk, 0)) for run in judged
    )


def run_spent_attempt(run: Run) -> bool:
    """Whether this run spent its attempt's share: a verdict that tested something, or, for
    G3, one complete repetition (every cell measured), still running or however it ended: no
    cancel gives the share back."""
    if run.rehearsal:
        return False
    if _runs_with_spending_verdicts([run.pk]):
        return True
    if run.spec.document.get("gate") != "G3":
        return False
    return attempt_spent(_complete_repetitions([run]).get(run.pk, 0))


def run_attempt_at_cancel(run: Run) -> dict[str, bool]:
    """For the audit trail of a cancel: whether the G3 run spends its attempt, as it stands
    now; nothing for other kinds."""
    if run.spec.document.get("gate") != "G3":
        return {}
    return {"attempt_spent": run_spent_attempt(run)}


def _may_spend_unjudged(run: Run) -> bool:
    return run.state in Run.ENDED and run.spec.document.get("gate") == "G3"


def _runs_with_spending_verdicts(run_ids: list[int]) -> set[int]:
    if not run_ids:
        return set()
    decisions = Decision.objects.filter(
        kind=Decision.Kind.ENGINE, rehearsal=False, verdict__in=SPENDING, runs__in=run_ids
    )
    return set(decisions.values_list("runs", flat=True)) & set(run_ids)


def _complete_repetitions(runs: list[Run]) -> dict[int, int]:
    """Per run: repetitions in which every cell (arm x tier) of its spec was measured."""
    if not runs:
        return {}
    cells = {
        run.pk: len(run.spec.document.get("arms") or {}) * len(run.spec.document.get("tiers") or [])
        for run in runs
    }
    rows = (
        Measurement.objects.filter(run_id__in=list(cells))
        .values("run_id", "repetition")
        .annotate(measured=Count("id"))
    )
    complete: dict[int, int] = {}
    for row in rows:
        if cells[row["run_id"]] and row["measured"] >= cells[row["run_id"]]:
            complete[row["run_id"]] = complete.get(row["run_id"], 0) + 1
    return complete


def _counted_runs(gate: Gate):
    runs = gate.runs.filter(rehearsal=False).select_related("spec")
    reset_at = gate_last_reset_at(gate)
    return runs if reset_at is None else runs.filter(created_at__gt=reset_at)


def gate_attempts_allowed(document: dict) -> int | None:
    """The spec's cap on attempts; None where it states none (a spec written before it)."""
    if document.get("gate") != "G3":
        return None
    return (document.get("statistics") or {}).get("attempts")


def gate_check_attempts_left(gate: Gate) -> None:
    allowed = gate_attempts_allowed(gate.current_spec.document)
    spent = gate_attempts_spent(gate)
    if allowed is not None and spent >= allowed:
        raise AttemptsSpentError(
            f"{gate.kind} has used {spent} of the {allowed} attempts its spec allows: the error "
            "budget is spent (a vendor admin may stop the engagement or waive the gate)",
            field="statistics.attempts",
        )


def gate_attempts_exhausted(gate: Gate, document: dict) -> bool:
    """No attempt left and none passed: the gate goes to stop-loss review like a spent fail."""
    allowed = gate_attempts_allowed(document)
    return allowed is not None and gate_attempts_spent(gate) >= allowed


def g3_decision_context(gate: Gate) -> dict:
    """Which attempt this is, and the engagement's G2 A/A noise (the floor under G3's sd)."""
    return {
        "attempt": gate_attempts_spent(gate) + 1,
        "noise_floor": engagement_noise_floor(gate.engagement),
    }
