"""Celery tasks: thin. Each loads by id, claims, calls services and the driver, records.

The database is the source of truth; a message is only a poke, so every task is safe to run
twice. This and config/celery.py are the only modules that import Celery.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from gates import services
from gates.models import Run, ServiceHeartbeat
from runners import driver, soakhost
from runners.errors import RunnerError
from runners.execution import RunPlan
from runners.transport import LocalTransport, Transport, open_transport

logger = logging.getLogger(__name__)


@shared_task(name="runners.advance_run")
def advance_run(run_id: int) -> None:
    """Drive a run for one time budget; enqueue the next task if it is not over."""
    session = services.RunSession.claim_dispatched(run_id)
    if session is None:  # ended, or another live task drives it
        return
    more = False
    try:
        more = _drive(session)
    except services.ClaimLostError:
        return
    except (RunnerError, services.ServiceError) as error:
        outcome = getattr(error, "outcome", Run.Outcome.INTERNAL_ERROR)
        _fail(session, outcome, str(error))
    except Exception:
        _fail(session, Run.Outcome.INTERNAL_ERROR, "unexpected error; see the worker log")
        raise
    finally:
        session.release()
    if more:
        advance_run.delay(run_id)


def _drive(session: services.RunSession) -> bool:
    plan = services.run_execution(session.run)
    with _transport(plan) as transport, tempfile.TemporaryDirectory() as scratch:
        return driver.drive(
            session,
            plan.step_context(transport, Path(scratch)),
            budget_s=settings.TOLLGATE_TASK_BUDGET_S,
            probe_names=plan.probe_names,
        )


def _fail(session: services.RunSession, outcome: str, reason: str) -> None:
    """End the run without a verdict, after stopping what it left on the host."""
    logger.warning("run %s: %s: %s", session.run.pk, outcome, reason)
    problems = []
    with contextlib.suppress(RunnerError, services.ServiceError):
        plan = services.run_execution(session.run)
        with _transport(plan) as transport:
            problems = driver.stop_all(transport, session.launched_dirs())
    note = "".join(f"\n{problem}" for problem in problems)
    services.run_fail(run_id=session.run.pk, outcome=outcome, reason=reason + note)


def _transport(plan: RunPlan) -> Transport:
    if plan.target is None:
        return LocalTransport(plan.host_name)
    return open_transport(plan.target)


@shared_task(name="runners.reap_stale_runs")
def reap_stale_runs() -> None:
    for run_id in services.runs_stale(older_than_s=settings.TOLLGATE_RUN_STALE_AFTER_S):
        session = services.RunSession.claim(run_id)
        if session is None:
            continue
        try:
            _fail(
                session,
                Run.Outcome.INFRA_ERROR,
                f"no heartbeat for {settings.TOLLGATE_RUN_STALE_AFTER_S} s: the worker or "
                "the host was lost",
            )
        finally:
            session.release()


@shared_task(name="runners.redispatch_runs")
def redispatch_runs() -> None:
    for run_id in services.runs_to_redispatch(older_than_s=settings.TOLLGATE_REDISPATCH_AFTER_S):
        advance_run.delay(run_id)


@shared_task(name="runners.deliver_alert")
def deliver_alert(alert_id: int) -> None:
    services.alert_deliver(alert_id=alert_id)


@shared_task(name="runners.deliver_alerts")
def deliver_alerts() -> None:
    for alert_id in services.alert_claim_due():
        services.alert_deliver(alert_id=alert_id)


@shared_task(name="runners.canary")
def canary() -> None:
    ServiceHeartbeat.objects.update_or_create(name="worker", defaults={"at": timezone.now()})


@shared_task(name="runners.tick_soaks")
def tick_soaks() -> None:
    """Beat: poke one collector tick per soak that is due."""
    for run_id in services.soaks_due():
        tick_soak.delay(run_id)


@shared_task(name="runners.tick_soak")
def tick_soak(run_id: int) -> None:
    """One collector tick of a soak: claim it, read its host, record. A transport error only
    means "try next tick" (the service ends the run once the soak was unobserved too long)."""
    tick = services.soak_tick_claim(run_id)
    if tick is None:  # ended, or another tick reads it right now
        return
    try:
        with _transport(tick.plan) as transport, tempfile.TemporaryDirectory() as scratch:
            found = soakhost.tick(transport, tick.host_state(), Path(scratch))
            logger.info("soak %s: %s", run_id, services.soak_tick_record(tick, found))
            _stop_if_failed(transport, run_id)
    except RunnerError as error:
        logger.info("soak %s: %s", run_id, services.soak_tick_unreachable(tick, str(error)))
    finally:
        services.soak_tick_release(tick)


def _stop_if_failed(transport: Transport, run_id: int) -> None:
    """A soak that ended without a verdict may leave an agent behind: stop what is there."""
    run = Run.objects.get(pk=run_id)
    if run.is_ended and run.outcome not in ("", Run.Outcome.COMPLETED):
        driver.stop_all(transport, services.run_remote_dirs(run))
