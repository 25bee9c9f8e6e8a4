"""The run page's reads and downloads: its steps with times, its raw files with their SHA-256,
its whole log. HTTP only: every lookup goes through tenancy."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from gates.inputs import id_input
from gates.logtail import LogWindow, log_tail
from gates.models import Artifact, Run
from gates.pages import formatting
from gates.services.runs.evaluation import run_replay_fidelity as replay_fidelity
from gates.tenancy import get_visible_or_404, viewer_for_request


@dataclass(frozen=True)
class StepRow:
    position: int
    name: str
    state: str
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


def run_steps(run: Run) -> list[StepRow]:
    fields = ("position", "name", "state", "started_at", "finished_at")
    return [StepRow(*row) for row in run.steps.order_by("position").values_list(*fields)]


def run_files(run: Run) -> list[Artifact]:
    """The run's raw files, without their content (which may be megabytes each)."""
    return list(run.artifacts.defer("content").order_by("name"))


def run_replay_fidelity(run: Run) -> dict | None:
    """Each replayed cell's fidelity (docs/workloads.md section 9); None for a run that sent
    no trace replay."""
    return replay_fidelity(run)


def run_log_window(run: Run) -> LogWindow:
    return log_tail(run.log, run.log_written)


@login_required
@require_GET
def run_log_download(request: HttpRequest, pk: int) -> HttpResponse:
    """The log as the server keeps it (the newest 64 KiB), as a text file."""
    run = get_visible_or_404(Run, viewer_for_request(request), pk=pk)
    response = HttpResponse(run.log, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.log"'
    return response


@login_required
@require_GET
def run_file_download(request: HttpRequest, pk: int) -> HttpResponse:
    """One raw file of the run (`?id=`), byte for byte, its SHA-256 in `Content-Digest`."""
    run = get_visible_or_404(Run, viewer_for_request(request), pk=pk)
    wanted = id_input(request.GET, "id")
    artifact = run.artifacts.filter(pk=wanted).first() if wanted is not None else None
    if artifact is None:
        raise Http404("no such file in this run")
    response = HttpResponse(bytes(artifact.content), content_type="application/octet-stream")
    name = PurePosixPath(artifact.name).name.replace('"', "") or f"file-{artifact.pk}"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["Content-Digest"] = f"sha-256=:{_base64(artifact.sha256)}:"  # RFC 9530
    return response


def _base64(hex_digest: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(hex_digest)).decode()
    except (ValueError, binascii.Error):
        return ""


def run_stall(run: Run, now: datetime, limit_s: float, *, soak: bool) -> str:
    """What the run page says when a queued or running run has shown no sign of life (a step's
    heartbeat, its start, its queueing) for longer than a step may take; "" otherwise. Uploaded
    runs wait on a person and a soak's collector is watched by the beat (the service banner
    says when the beat is down), as gates.services.runs_stale has it."""
    if run.is_ended or soak or run.source != Run.Source.REMOTE:
        return ""
    last = run.heartbeat_at or run.started_at or run.created_at
    quiet_s = (now - last).total_seconds()
    if quiet_s <= limit_s:
        return ""
    quiet = formatting.duration(quiet_s)
    if run.state == Run.State.QUEUED:
        return f"Queued for {quiet} and no worker has picked it up: the worker may be down."
    return (
        f"No sign of life for {quiet} (a step reports within {formatting.duration(limit_s)}): "
        "the worker or the host may be down. It is marked failed if it stays silent."
    )
