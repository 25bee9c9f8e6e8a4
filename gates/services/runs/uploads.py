"""Results of air-gapped hosts, uploaded by a person: each upload is a recorded step of an
upload run, with its raw file kept (marked uploaded) and its facts or measurement; the same
decision engine then decides the run."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError
from gates.models import Measurement, Run, RunStep
from gates.services.audit import Actor, audit_record
from gates.services.runs.evaluation import Evaluation, run_evaluate
from gates.services.runs.results import run_result_store
from gates.tenancy import Viewer
from runners import results


class AlreadyUploadedError(ServiceError):
    code = "already_uploaded"
    status = 409


class MoreRepetitionsError(ServiceError):
    code = "more_repetitions"
    status = 409


def run_upload_record(
    *,
    actor: Actor,
    viewer: Viewer,
    run: Run,
    name: str,
    proof: results.Proof,
) -> RunStep:
    """Store one upload named `name`: its raw files, and what they proved."""
    if not viewer.can("run.start"):
        raise NotAllowedError("you may not upload results")
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        _check_open_upload_run(run)
        _check_not_uploaded(run, name, proof.measurement)
        step = RunStep(
            run=run,
            position=run.steps.count(),
            name=name,
            state=RunStep.State.DONE,
            started_at=timezone.now(),
            finished_at=timezone.now(),
            detail={"step": {"name": name, "kind": "upload"}, "facts": {}},
        )
        stored = run_result_store(
            step=step,
            artifacts=proof.artifacts,
            measurement=proof.measurement,
            facts=proof.facts,
            uploaded=True,
        )
        step.detail["files"] = {label: a.sha256 for label, a in stored.items()}
        step.save()
        run.progress_total = run.progress_done = run.steps.count()
        run.save(update_fields=["progress_total", "progress_done"])
        audit_record(
            actor=actor,
            action="run.upload",
            target=run,
            organization_id=run.gate.engagement.organization_id,
            detail={"step": name, "files": step.detail["files"]},
        )
    return step


def run_upload_decide(*, actor: Actor, viewer: Viewer, run: Run) -> Evaluation:
    """Decide an upload run now; refused while the engine needs more repetitions."""
    if not viewer.can("run.start"):
        raise NotAllowedError("you may not decide runs")
    _check_open_upload_run(run)
    _check_minimum_repetitions(run)
    evaluation = run_evaluate(run)
    if not evaluation.decided:
        raise MoreRepetitionsError(
            f"the decision plan needs {evaluation.more} more repetition(s), starting with "
            f"repetition {evaluation.first}; upload them, then decide again",
            field="repetition",
        )
    audit_record(
        actor=actor,
        action="run.decide",
        target=run,
        organization_id=run.gate.engagement.organization_id,
        detail={"verdict": evaluation.verdict},
    )
    return evaluation


def _check_minimum_repetitions(run: Run) -> None:
    """A G3 verdict needs the spec's minimum of complete repetitions before it is asked."""
    spec = run.spec.document
    if spec["gate"] != "G3":
        return
    cells = set(run.measurements.values_list("arm", "tier", "repetition"))
    complete = [
        r
        for r in {rep for _, _, rep in cells}
        if all((arm, tier, r) in cells for arm in spec["arms"] for tier in spec["tiers"])
    ]
    needed = spec["repetitions"]["min"]
    if len(complete) < needed:
        raise MoreRepetitionsError(
            f"{len(complete)} complete repetition(s) uploaded (every arm at every tier); the "
            f"spec asks for at least {needed} before a verdict",
            field="repetition",
        )


def _check_not_uploaded(run: Run, name: str, measurement: dict | None) -> None:
    """Storing is idempotent (a redelivered remote step); a person uploading twice is told."""
    if run.steps.filter(name=name).exists():
        raise AlreadyUploadedError(f"'{name}' was uploaded already", field="file")
    if measurement is None:
        return
    cell = {key: measurement[key] for key in ("arm", "tier", "repetition")}
    if Measurement.objects.filter(run=run, **cell).exists():
        raise AlreadyUploadedError(
            f"arm {cell['arm']} c={cell['tier']} repetition {cell['repetition']} has a result",
            field="repetition",
        )


def _check_open_upload_run(run: Run) -> None:
    if run.source != Run.Source.UPLOAD:
        raise IllegalTransitionError("results can be uploaded only to an upload run", field="run")
    if run.state != Run.State.RUNNING:
        raise IllegalTransitionError(f"the run is {run.state}", field="run")
