"""Repetitions carried into the next G3 attempt (`statistics.carry_repetitions`): a new attempt
after an inconclusive one starts from that attempt's complete repetitions and continues its
looks on the union (gates.decisions.statistics.budget.attempt_plan says why the error budget
stays honest: the carried looks were spent by the attempt that made them, this one spends only
its own share, judged by its own repetitions in attempts.py).

Only from the gate's latest counted attempt, only when it ended inconclusive, and only on the
same spec version, the same host and the same profile snapshot (its digest: a host's Profile
row can be edited, or the host pointed at another, between attempts); otherwise the run is
refused with the reason, since the spec promised a carried attempt. Repetitions that attempt
set aside, or that miss a cell, are not carried (documents.carry.complete_repetitions, the one
rule the offline verifier applies too). The carrying run numbers its own repetitions after
every number the carried chain used, so one numbering covers the union.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from documents.carry import (
    CarriedSource,
    complete_repetitions,
    set_aside_repetitions,
    source_record,
    spec_cells,
)
from documents.profile import short_digest
from gates.errors import ServiceError
from gates.models import Decision, Gate, Host, Run
from gates.selectors import gate_last_reset_at, run_measurement_records


class CarryRefusedError(ServiceError):
    """The spec carries repetitions, but the previous attempt's cannot be carried here."""

    code = "carry_refused"
    status = 409


@dataclass(frozen=True)
class Carry:
    """What a new attempt carries: the run, how many repetitions, where its own numbers start."""

    source: Run
    repetitions: int
    first_repetition: int


def g3_carry(gate: Gate, host: Host | None, profile: dict[str, Any]) -> Carry | None:
    """What a new run of the gate carries under its current spec; None when it starts afresh
    (the spec does not carry, or no inconclusive attempt precedes it). CarryRefusedError when
    the previous attempt cannot be carried onto this spec version, host or profile (`profile`:
    the new run's snapshot fields, workorder.run_profile_fields)."""
    spec = gate.current_spec
    if spec.document.get("gate") != "G3":
        return None
    if not (spec.document.get("statistics") or {}).get("carry_repetitions"):
        return None
    previous = _latest_counted_run(gate)
    if previous is None or _engine_verdict(previous) != "inconclusive":
        return None
    name = f"run #{previous.attempt}"
    if previous.spec_id != spec.pk:
        raise CarryRefusedError(
            f"the spec carries repetitions, but {name} ran spec v{previous.spec.version} and "
            f"this run would run v{spec.version}: repetitions carry only within one spec version",
            field="statistics.carry_repetitions",
        )
    if previous.host_id != (host.pk if host else None):
        where = previous.host.name if previous.host else "uploaded results"
        raise CarryRefusedError(
            f"the spec carries repetitions, but {name} ran on {where}: repetitions carry only "
            "onto the same host and profile",
            field="host",
        )
    _check_same_profile(previous, name, profile)
    rows = run_carried_records(previous) + run_measurement_records(previous)
    kept = _complete(previous, rows)
    if not kept:
        return None
    top = max(row["repetition"] for row in rows)
    return Carry(previous, len(kept), top + 1)


def carry_fields(carry: Carry | None) -> dict:
    """The new run's carry fields (none: it starts afresh, at repetition 1)."""
    if carry is None:
        return {}
    return {
        "carried_from": carry.source,
        "carried_repetitions": carry.repetitions,
        "first_repetition": carry.first_repetition,
    }


def carry_audit(carry: Carry | None) -> dict:
    """What the run.create audit event says of the carry (nothing when it starts afresh)."""
    return {} if carry is None else {"carries": carry.repetitions, "carried_from": carry.source.pk}


def run_carried_records(run: Run) -> list[dict]:
    """The measurement records a run carries from its predecessors (its chain), in cell order."""
    return [row for _, rows in run_carried_by_source(run) for row in rows]


def run_carried_by_source(run: Run) -> list[tuple[Run, list[dict]]]:
    """The records a run carries, by the run of its chain that measured them (oldest first):
    what its evidence bundle holds beside each record's raw files."""
    source = run.carried_from
    if source is None:
        return []
    groups = [*run_carried_by_source(source), (source, run_measurement_records(source))]
    kept = _complete(source, [row for _, rows in groups for row in rows])
    picked = [
        (origin, [row for row in rows if row["repetition"] in kept]) for origin, rows in groups
    ]
    return [(origin, rows) for origin, rows in picked if rows]


def run_carried_source(run: Run) -> CarriedSource | None:
    """What the evidence holds of the attempt `run` carries from, for the verifier to recompute
    the carried set: its engine decision's set-aside repetitions and every record of its chain
    (the source's own and those it carried), each as its digest."""
    source = run.carried_from
    if source is None:
        return None
    decision = _engine_decision(source)
    groups = [*run_carried_by_source(source), (source, run_measurement_records(source))]
    return {
        "attempt": source.attempt,
        "decision": None
        if decision is None
        else {
            "id": decision.pk,
            "verdict": decision.verdict,
            "set_aside": set_aside_repetitions(decision.result or {}),
        },
        "records": [source_record(origin.attempt, row) for origin, rows in groups for row in rows],
    }


def _complete(run: Run, rows: list[dict]) -> set[int]:
    """The repetitions of `rows` that measured every cell (arm x tier) and that the run's
    decision did not set aside."""
    decision = _engine_decision(run)
    aside = set_aside_repetitions(decision.result or {}) if decision else []
    return complete_repetitions(spec_cells(run.spec.document), rows, aside)


def _check_same_profile(previous: Run, name: str, profile: dict[str, Any]) -> None:
    """Refuse unless the previous attempt ran the profile this run would, by digest. A run made
    before runs kept a snapshot (or an upload with no host, beside one with a host) cannot be
    shown to have run the same command lines, so it is refused too rather than trusted: a
    carried repetition must be one the new attempt could have measured itself. Two uploads
    with no host both have no profile (nothing Tollgate drove) and carry as before; two that
    name one carry only with the same parameters too (they stand in for the one host's)."""
    digest = profile.get("profile_digest", "")
    if previous.profile_digest == digest:
        _check_same_upload_parameters(previous, name, profile.get("upload_parameters") or {})
        return
    this = (profile.get("profile_snapshot") or {}).get("name")
    if not previous.profile_digest:
        raise CarryRefusedError(
            f"the spec carries repetitions, but {name} kept no profile snapshot (it was made "
            f"before runs kept one), so it cannot be shown to have run profile {this} "
            f"(digest {short_digest(digest)}): repetitions carry only with the same profile",
            field="profile",
        )
    raise CarryRefusedError(
        f"the spec carries repetitions, but {name} ran profile {previous.profile_name} "
        f"(digest {short_digest(previous.profile_digest)}) and this run would run profile "
        f"{this} (digest {short_digest(digest)}): repetitions carry only with the same "
        "profile (its name, commands and parameters)",
        field="profile",
    )


def _latest_counted_run(gate: Gate) -> Run | None:
    runs = gate.runs.filter(rehearsal=False).select_related("spec", "host")
    reset_at = gate_last_reset_at(gate)
    if reset_at is not None:
        runs = runs.filter(created_at__gt=reset_at)
    return runs.order_by("-attempt").first()


def _engine_decision(run: Run) -> Decision | None:
    return run.decisions.filter(kind=Decision.Kind.ENGINE).order_by("-id").first()


def _engine_verdict(run: Run) -> str | None:
    decision = _engine_decision(run)
    return decision.verdict if decision else None


def _check_same_upload_parameters(previous: Run, name: str, parameters: dict[str, Any]) -> None:
    if previous.upload_parameters != parameters:
        raise CarryRefusedError(
            f"the spec carries repetitions, but {name} was uploaded with parameters "
            f"{previous.upload_parameters} and this run names {parameters}: repetitions carry "
            "only with the same profile and parameters",
            field="parameters",
        )
