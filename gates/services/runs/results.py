"""Storing what one step proved (runners.results): its raw files with their digests, its
measurement, its facts. The one writer of Artifact and Measurement rows, for the gate programs
(RunSession.record) and uploads alike; callers hold the run's lock and check their own rules."""

from __future__ import annotations

import hashlib

from gates.models import Artifact, Measurement, RunStep
from runners.artifact import Artifact as RunnerArtifact


def run_result_store(
    *,
    step: RunStep,
    artifacts: list[RunnerArtifact],
    measurement: dict | None = None,
    facts: dict | None = None,
    uploaded: bool = False,
) -> dict[str, Artifact]:
    """Keep the step's files and measurement, and merge its facts into `step.detail` (saved by
    the caller with the step's state). Storing the same again changes nothing: files are unique
    by name in a run and a measurement by its cell, so a redelivered task is a no-op."""
    stored = {a.name: _artifact_store(step, a, uploaded=uploaded) for a in artifacts}
    if measurement is not None:
        artifact = measurement.get("artifact")
        Measurement.objects.get_or_create(
            run_id=step.run_id,
            arm=measurement["arm"],
            tier=measurement["tier"],
            repetition=measurement["repetition"],
            defaults={
                "metrics": measurement["metrics"],
                "server": measurement.get("server"),
                "artifact": stored.get(artifact) if artifact is not None else None,
            },
        )
    if facts:
        step.detail["facts"] = {**step.detail.get("facts", {}), **facts}
    return stored


def _artifact_store(step: RunStep, artifact: RunnerArtifact, *, uploaded: bool) -> Artifact:
    stored, _ = Artifact.objects.get_or_create(
        run_id=step.run_id,
        name=artifact.name,
        defaults={
            "tool": artifact.tool,
            "content": artifact.content,
            "size": len(artifact.content),
            "sha256": hashlib.sha256(artifact.content).hexdigest(),
            "uploaded": uploaded,
        },
    )
    return stored


def run_artifacts_store(*, run_id: int, artifacts: list[RunnerArtifact]) -> None:
    """Keep raw files of a run that belong to no step (a soak's windows), in one INSERT; a name
    already stored keeps its first content, so a repeated or concurrent read is a no-op."""
    Artifact.objects.bulk_create(
        [
            Artifact(
                run_id=run_id,
                name=artifact.name,
                tool=artifact.tool,
                content=artifact.content,
                size=len(artifact.content),
                sha256=hashlib.sha256(artifact.content).hexdigest(),
            )
            for artifact in artifacts
        ],
        ignore_conflicts=True,
    )
