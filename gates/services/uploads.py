"""Results of air-gapped hosts, uploaded by a person: each upload is a recorded step of an
upload run, with its raw file kept (marked uploaded) and its facts or measurement; the same
decision engine then decides the run."""

from __future__ import annotations

import hashlib

from django.db import transaction
from django.utils import timezone

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError
from gates.models import Artifact, Measurement, Run, RunStep
from gates.services.audit import Actor, audit_record
from gates.services.evaluation import Evaluation, run_evaluate
from gates.tenancy import Viewer


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
    files: list[tuple[str, str, bytes]],
    facts: dict | None = None,
    measurement: dict | None = None,
) -> RunStep:
    """Store one upload: raw files (name, tool, bytes), and what they proved."""
    if not viewer.can("run.start"):
        raise NotAllowedError("you may not upload results")
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        _check_open_upload_run(run)
        if run.steps.filter(name=name).exists():
            raise AlreadyUploadedError(f"'{name}' was uploaded already", field="file")
        stored = {label: _store(run, label, tool, content) for label, tool, content in files}
        step = RunStep.objects.create(
            run=run,
            position=run.steps.count(),
            name=name,
            state=RunStep.State.DONE,
            started_at=timezone.now(),
            finished_at=timezone.now(),
            detail={
                "step": {"name": name, "kind": "upload"},
                "facts": facts or {},
                "files": {label: a.sha256 for label, a in stored.items()},
            },
        )
        if measurement is not None:
            _store_measurement(run, measurement, stored.get(measurement["artifact"]))
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


def _check_open_upload_run(run: Run) -> None:
    if run.source != Run.Source.UPLOAD:
        raise IllegalTransitionError("results can be uploaded only to an upload run", field="run")
    if run.state != Run.State.RUNNING:
        raise IllegalTransitionError(f"the run is {run.state}", field="run")


def _store(run: Run, label: str, tool: str, content: bytes) -> Artifact:
    return Artifact.objects.create(
        run=run,
        name=label,
        tool=tool,
        content=content,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        uploaded=True,
    )


def _store_measurement(run: Run, measurement: dict, artifact: Artifact | None) -> None:
    cell = {key: measurement[key] for key in ("arm", "tier", "repetition")}
    if Measurement.objects.filter(run=run, **cell).exists():
        raise AlreadyUploadedError(
            f"arm {cell['arm']} c={cell['tier']} repetition {cell['repetition']} has a result",
            field="repetition",
        )
    Measurement.objects.create(
        run=run,
        **cell,
        metrics=measurement["metrics"],
        server=measurement.get("server"),
        artifact=artifact,
    )
