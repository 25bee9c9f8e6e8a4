"""Recording a run's program as it advances: the driver claim, steps and their results (stored
by gates.services.runs.results), progress, heartbeats, and the evaluation that decides the run.

A RunSession is what runners.program.driver talks to; it never imports runners. Every write of steps
and results checks the run's fencing token, so a task that lost its host's lease (or its claim)
cannot write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from documents.step import Step
from gates.errors import ServiceError
from gates.models import Run, RunStep, Soak
from gates.services.runs.evaluation import Evaluation, run_evaluate
from gates.services.runs.lifecycle import run_assert_lease, run_mark_canceled
from gates.services.runs.results import run_result_store
from gates.services.soak.ticks import soak_begin
from runners.soak.collector import SoakPaths
from runners.stepcontext import StepProgress

MAX_STEP_DELIVERIES = 5


def _claim_until():
    return timezone.now() + timedelta(seconds=settings.TOLLGATE_DRIVER_CLAIM_S)


LOG_LIMIT_CHARS = 64 * 1024


class ClaimLostError(ServiceError):
    """Another task now drives this run (our claim expired); stop without writing."""

    code = "claim_lost"
    status = 409


class PoisonStepError(ServiceError):
    """A step was taken up too many times: something kills its task every time."""

    code = "poison_step"
    status = 500


@dataclass
class RunSession:
    run: Run
    token: str
    taken: set[int] = field(default_factory=set)

    # --- claim -------------------------------------------------------------------------
    @classmethod
    def claim_dispatched(cls, run_id: int) -> RunSession | None:
        """The one claim of a task sent to drive a run: records that a task got there, moves a
        queued run to running and takes the driver claim. None when the run ended, is an upload
        run, or another live task drives it. Conditional UPDATEs: two copies of the task, at
        once or one after the other, get one session between them."""
        now = timezone.now()
        driven = Run.objects.filter(
            pk=run_id, state__in=(Run.State.QUEUED, Run.State.RUNNING), source=Run.Source.REMOTE
        ).exclude(outage_retry_at__gt=now)  # riding out an outage: the next try is not due
        # A poke that finds the run driven still counts: the redispatcher looks for silent runs.
        driven.update(last_dispatched_at=now)
        return cls._claim(
            run_id, driven, state=Run.State.RUNNING, started_at=Coalesce("started_at", Value(now))
        )

    @classmethod
    def claim(cls, run_id: int) -> RunSession | None:
        """Take over a running run (the reaper does); None when another live task drives it."""
        return cls._claim(run_id, Run.objects.filter(pk=run_id, state=Run.State.RUNNING))

    @classmethod
    def _claim(cls, run_id: int, runs: QuerySet[Run], **changes: object) -> RunSession | None:
        now = timezone.now()
        token = str(uuid.uuid4())
        free = Q(driver_until__isnull=True) | Q(driver_until__lt=now)
        claimed = runs.filter(free).update(
            driver_token=token, driver_until=_claim_until(), heartbeat_at=now, **changes
        )
        if claimed != 1:
            return None
        run = Run.objects.select_related("gate__engagement", "spec", "host__profile").get(pk=run_id)
        return cls(run=run, token=token)

    def release(self) -> None:
        """Hand the run over cleanly: a step left unfinished on purpose (still polling) is not
        a failed delivery, so its counter starts again; only killed tasks accumulate."""
        with transaction.atomic():
            mine = Run.objects.filter(pk=self.run.pk, driver_token=self.token)
            if mine.update(driver_until=None):
                self.run.steps.filter(pk__in=self.taken).exclude(state=RunStep.State.DONE).update(
                    deliveries=0
                )

    def heartbeat(self) -> None:
        renewed = Run.objects.filter(
            pk=self.run.pk, driver_token=self.token, state=Run.State.RUNNING
        ).update(driver_until=_claim_until(), heartbeat_at=timezone.now())
        if renewed != 1:
            raise ClaimLostError(f"run {self.run.pk}: another task drives it now")

    # --- the plan ------------------------------------------------------------------------
    @property
    def spec(self) -> dict[str, Any]:
        return self.run.spec.document

    @property
    def first_repetition(self) -> int:
        return self.run.first_repetition

    def has_plan(self) -> bool:
        return self.run.steps.exists()

    def append_steps(self, steps: list[Step]) -> None:
        with transaction.atomic():
            locked = self._check_writer()
            start = self.run.steps.count()
            RunStep.objects.bulk_create(
                RunStep(run=self.run, position=start + i, name=step["name"], detail={"step": step})
                for i, step in enumerate(steps)
            )
            self._update_progress(locked)

    def next_step(self) -> tuple[Step, dict[str, Any]] | None:
        """The first unfinished step and what was recorded of it so far."""
        row = self.run.steps.exclude(state=RunStep.State.DONE).order_by("position").first()
        if row is None:
            return None
        if row.pk not in self.taken:
            self._take(row)
        return row.detail["step"], row.detail.get("progress", {})

    def _take(self, row: RunStep) -> None:
        row.deliveries += 1
        if row.deliveries > MAX_STEP_DELIVERIES:
            raise PoisonStepError(
                f"step '{row.name}' was taken up {row.deliveries - 1} times without finishing"
            )
        row.state = RunStep.State.STARTED
        row.started_at = row.started_at or timezone.now()
        row.save(update_fields=["deliveries", "state", "started_at"])
        self.taken.add(row.pk)

    # --- recording -------------------------------------------------------------------------
    def record(self, step: Step, progress: StepProgress) -> None:
        """Store one performed or polled step: detail, artifacts, measurement, log, progress."""
        with transaction.atomic():
            locked = self._check_writer()
            row = RunStep.objects.select_for_update().get(run=self.run, name=step["name"])
            row.detail = {
                **row.detail,
                "progress": {**row.detail.get("progress", {}), **progress.detail},
            }
            run_result_store(
                step=row,
                artifacts=progress.artifacts,
                measurement=progress.measurement,
                facts=progress.facts,
            )
            if progress.done:
                row.state, row.finished_at = RunStep.State.DONE, timezone.now()
            row.save(update_fields=["detail", "state", "finished_at"])
            self._update_progress(locked, log=progress.log)

    def _update_progress(self, run: Run, log: str = "") -> None:
        """Progress, heartbeat and claim renewal on the run row `_check_writer` locked."""
        steps = self.run.steps
        run.progress_total = steps.count()
        run.progress_done = steps.filter(state=RunStep.State.DONE).count()
        run.heartbeat_at = timezone.now()
        run.driver_until = _claim_until()
        if log:
            _append_log(run, log)
        run.save(
            update_fields=[
                "progress_total",
                "progress_done",
                "heartbeat_at",
                "driver_until",
                "log",
                "log_written",
            ]
        )

    def _check_writer(self) -> Run:
        """Lock the run row; refuse unless this task still drives it under a valid lease."""
        run = Run.objects.select_for_update().get(pk=self.run.pk)
        if run.driver_token != self.token or run.state != Run.State.RUNNING:
            raise ClaimLostError(f"run {self.run.pk}: no longer ours to write")
        run_assert_lease(run)
        return run

    # --- transport outages ----------------------------------------------------------------
    def note_outage(self, reason: str) -> tuple[float, int]:
        """Record that the host did not answer this time: (seconds since the outage began,
        tries failed in it). The heartbeat moves too: the worker is alive, the host is away,
        so the reaper leaves the run to the retry window."""
        now = timezone.now()
        noted = Run.objects.filter(
            pk=self.run.pk, driver_token=self.token, state=Run.State.RUNNING
        ).update(
            outage_since=Coalesce("outage_since", Value(now)),
            outage_retries=F("outage_retries") + 1,
            heartbeat_at=now,
        )
        if noted != 1:
            raise ClaimLostError(f"run {self.run.pk}: no longer ours to write")
        since, retries = Run.objects.values_list("outage_since", "outage_retries").get(
            pk=self.run.pk
        )
        if retries == 1:
            self._log(f"host unreachable, retrying: {reason[:300]}\n")
        return (now - since).total_seconds(), retries

    def retry_in(self, seconds: float) -> None:
        """No task takes the run up before `seconds` from now; the beat pokes it then."""
        now = timezone.now()
        Run.objects.filter(pk=self.run.pk, driver_token=self.token).update(
            outage_retry_at=now + timedelta(seconds=seconds), heartbeat_at=now
        )

    def host_answered(self) -> None:
        """The host answered: a later failure starts a new outage with a full window."""
        ended = Run.objects.filter(pk=self.run.pk, outage_since__isnull=False).update(
            outage_since=None, outage_retries=0, outage_retry_at=None
        )
        if ended:
            self._log("host reachable again; the run goes on where it was\n")

    def _log(self, line: str) -> None:
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=self.run.pk)
            _append_log(run, line)
            run.save(update_fields=["log", "log_written"])

    # --- cancel and cleanup -------------------------------------------------------------
    def cancel_requested(self) -> bool:
        return Run.objects.filter(pk=self.run.pk, cancel_requested_at__isnull=False).exists()

    def launched_dirs(self) -> list[str]:
        return run_remote_dirs(self.run)

    def mark_canceled(self) -> None:
        run_mark_canceled(run_id=self.run.pk, reason="canceled by request; host processes stopped")

    def hand_off(self, step: Step, progress: StepProgress) -> None:
        """Record the step and give the run to the soak collector (G4's beat ticks)."""
        self.record(step, progress)
        soak_begin(
            run=self.run,
            detail=progress.detail or self.run.steps.get(name=step["name"]).detail["progress"],
        )

    # --- evaluation ----------------------------------------------------------------------
    def evaluate(self) -> Evaluation:
        return run_evaluate(self.run)


def run_remote_dirs(run: Run) -> list[str]:
    """The host directories of the run's detached processes (servers, benches) launched so far:
    what to stop when the run ends, is canceled or is reaped. A step that launches one records
    its run_dir, whatever its kind."""
    details = run.steps.exclude(state=RunStep.State.PENDING).values_list("detail", flat=True)
    dirs = [
        detail["progress"]["run_dir"]
        for detail in details
        if detail.get("progress", {}).get("run_dir")
    ]
    soak = Soak.objects.filter(run=run).first()
    if soak is not None:  # every agent generation the collector relaunched
        paths = SoakPaths(soak.run_dir)
        dirs += [paths.agent_dir(g) for g in range(1, soak.generation + 1)]
    return list(dict.fromkeys(dirs))


def _append_log(run: Run, text: str) -> None:
    """Append to the run's bounded log, counting every character ever written."""
    run.log = (run.log + text)[-LOG_LIMIT_CHARS:]
    run.log_written += len(text)
