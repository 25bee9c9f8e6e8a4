"""Advances one run through its plan for a bounded time: perform or poll the current step,
record what came back, move on. Imports no Django: the task layer hands it a session that
records through gates.services.

A task drives for at most `budget_s`, then returns True so a fresh task takes over: no task
waits on a host for long, and a worker restart costs seconds, not the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from documents.step import Step
from runners.errors import RunnerError
from runners.program import sequence
from runners.program.perform import perform, wait_for_exit
from runners.stepcontext import StepContext, StepProgress
from runners.transport import Transport

logger = logging.getLogger(__name__)

FIRST_POLL_S = 0.05
MAX_POLL_S = 0.5
HEARTBEAT_EVERY_S = 5.0
# How long one wait on the host may block: a cancel is noticed within about this.
HOST_WAIT_S = 3.0


class Session(Protocol):
    @property
    def spec(self) -> dict[str, Any]: ...
    @property
    def first_repetition(self) -> int: ...

    def heartbeat(self) -> None: ...
    def has_plan(self) -> bool: ...
    def append_steps(self, steps: list[Step]) -> None: ...
    def next_step(self) -> tuple[Step, dict[str, Any]] | None: ...
    def record(self, step: Step, progress: StepProgress) -> None: ...
    def cancel_requested(self) -> bool: ...
    def launched_dirs(self) -> list[str]: ...
    def mark_canceled(self) -> None: ...
    def host_answered(self) -> None: ...
    def evaluate(self) -> Any: ...
    def hand_off(self, step: Step, progress: StepProgress) -> None: ...


def drive(
    session: Session,
    ctx: StepContext,
    *,
    budget_s: float,
    probe_names: list[str],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Advance the run; True when it needs another task, False when it ended here."""
    if not session.has_plan():
        plan = sequence.plan_run(session.spec, probe_names, first=session.first_repetition)
        session.append_steps(plan)
    deadline, pause, beat = clock() + budget_s, FIRST_POLL_S, clock()
    answered = False
    while True:
        if session.cancel_requested():
            # Every group stopped before the run ends and frees its host; a host that does not
            # answer raises, so the outage rule retries the cancel (or the run fails with a
            # pending cleanup that keeps the host from being leased).
            for run_dir in session.launched_dirs():
                ctx.transport.kill(run_dir, grace=5.0)
            session.mark_canceled()
            return False
        current = session.next_step()
        if current is None:
            if _evaluate(session):
                continue
            stop_all(ctx.transport, session.launched_dirs())
            return False
        step, detail = current
        progress = _perform_keeping_files(session, step, detail, ctx)
        if not answered:  # the host answered: an outage being ridden out is over
            session.host_answered()
            answered = True
        if progress.handoff:  # another driver (the soak collector) takes the run from here
            session.hand_off(step, progress)
            return False
        if progress.done or progress.detail or progress.artifacts or progress.log:
            session.record(step, progress)
            beat, pause = clock(), FIRST_POLL_S
        if clock() >= deadline:
            return True
        if progress.done:
            continue
        if clock() - beat >= HEARTBEAT_EVERY_S:
            session.heartbeat()
            beat = clock()
        if progress.waiting_on:
            wait_for_exit(ctx, progress.waiting_on, min(HOST_WAIT_S, deadline - clock()))
            continue
        sleep(pause)
        pause = min(pause * 1.5, MAX_POLL_S)


def _perform_keeping_files(
    session: Session, step: Step, detail: dict[str, Any], ctx: StepContext
) -> StepProgress:
    """Perform the step; a failure that carries the files it rests on leaves them on the
    step (not done) before it ends the run, so the failed run's evidence holds them too."""
    try:
        return perform(step, detail, ctx)
    except RunnerError as error:
        if error.artifacts:
            session.record(step, StepProgress(False, artifacts=list(error.artifacts)))
        raise


def _evaluate(session: Session) -> bool:
    """Ask for a verdict (the session gathers what the engine reads); True when the engine
    wants more repetitions, now planned."""
    evaluation = session.evaluate()
    if evaluation.decided:
        return False
    session.append_steps(
        sequence.plan_g3_repetitions(session.spec, first=evaluation.first, count=evaluation.more)
    )
    return True


def stop_all(transport: Transport, run_dirs: list[str]) -> list[str]:
    """Kill whatever the run left on the host (servers, benches); best effort, never raises.

    Returns the problems met, for the run log.
    """
    problems = []
    for run_dir in run_dirs:
        try:
            transport.kill(run_dir, grace=5.0)
        except RunnerError as error:
            problems.append(f"could not stop {run_dir}: {error}")
            logger.warning("could not stop %s: %s", run_dir, error)
    return problems
