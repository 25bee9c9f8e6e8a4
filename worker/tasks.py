"""Celery tasks: thin. Each loads by id, claims, calls services and the driver, records.

The database is the source of truth; a message is only a poke, so every task is safe to run
twice. This and config/celery.py are the only modules that import Celery.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from pathlib import Path

from celery import shared_task
from celery.beat import PersistentScheduler
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from kombu.exceptions import OperationalError

from gates import services
from gates.models import Run
from runners import cleanup
from runners.errors import ContractError, RunnerError
from runners.program import driver
from runners.program.workorder import RunPlan
from runners.soak import host as soak_host
from runners.transport import LocalTransport, Transport, open_transport
from runners.transport.network import is_transient, outage_retry_after
from runners.transport.pool import pooled_transport

logger = logging.getLogger(__name__)


@shared_task(name="runners.advance_run")
def advance_run(run_id: int) -> None:
    """Drive a run for one time budget; enqueue the next task if it is not over. While the
    host is unreachable (within the run's retry window) the next try is due after a backoff,
    recorded on the run: retry_unreachable_runs pokes it then (no broker ETA)."""
    session = services.RunSession.claim_dispatched(run_id)
    if session is None:  # ended, or another live task drives it
        return
    more, plan = False, None
    try:
        plan = services.run_execution(session.run)
        more = _drive(session, plan)
    except services.ClaimLostError:
        return
    except ContractError as error:
        # Raised before any server starts: nothing to stop on the host.
        services.run_invalid(
            run_id=session.run.pk, reason=str(error), differences=error.differences
        )
    except RunnerError as error:
        _retry_or_fail(session, plan, error)
    except services.ServiceError as error:
        _fail(session, getattr(error, "outcome", Run.Outcome.INTERNAL_ERROR), str(error))
    except Exception:
        _fail(session, Run.Outcome.INTERNAL_ERROR, "unexpected error; see the worker log")
        raise
    finally:
        session.release()
    if more:
        _poke_again(run_id)


def _poke_again(run_id: int) -> None:
    """The next task for a run with more to do. With the broker down the poke is lost and
    logged, not raised: the run's rows say what is left, and the beat's re-dispatch sweep pokes
    it once the broker is back (TOLLGATE_REDISPATCH_AFTER_S)."""
    try:
        advance_run.delay(run_id)
    except OperationalError as error:
        logger.warning("run %s: next step not queued (%s); re-dispatch will", run_id, error)


def _drive(session: services.RunSession, plan: RunPlan) -> bool:
    with _transport(plan) as transport, tempfile.TemporaryDirectory() as scratch:
        more = driver.drive(
            session,
            plan.step_context(transport, Path(scratch)),
            budget_s=settings.TOLLGATE_TASK_BUDGET_S,
            probe_names=plan.probe_names,
        )
        if not more and _ended(session):  # nothing of an ended run stays on the host
            _clean_up_after(session, plan, transport)
        return more


def _ended(session: services.RunSession) -> bool:
    """Whether the run ended here; a G4 handed to its collector did not: its agent and its run
    directory stay on the host until the soak ends."""
    session.run.refresh_from_db(fields=["state"])
    return session.run.is_ended


def _retry_or_fail(session: services.RunSession, plan: RunPlan | None, error: RunnerError) -> None:
    """Schedule the next try while a transient outage lasts less than the run's retry window;
    otherwise the run ends here."""
    if plan is None or not is_transient(error):
        _fail(session, error.outcome, str(error), plan)
        return
    try:
        outage_s, retries = session.note_outage(str(error))
    except services.ClaimLostError:  # canceled or taken over meanwhile: not ours to retry
        return
    delay = outage_retry_after(
        error, outage_s=outage_s, retries=retries, window_s=plan.retry_window_s
    )
    if delay is None:
        reason = (
            f"the host did not answer for {outage_s:.0f} s ({retries} tries; retry window "
            f"{plan.retry_window_s:.0f} s): {error}"
        )
        _fail(session, error.outcome, reason, plan)
        return
    session.retry_in(delay)


def _fail(
    session: services.RunSession, outcome: str, reason: str, plan: RunPlan | None = None
) -> None:
    """End the run without a verdict, after stopping what it left on the host; what could not
    be stopped is left to the janitor as a pending cleanup (the host cannot be leased)."""
    logger.warning("run %s: %s: %s", session.run.pk, outcome, reason)
    problems = []
    with contextlib.suppress(RunnerError, services.ServiceError):
        plan = plan or services.run_execution(session.run)
    if plan is not None:  # else the run's values are bad: nothing of it reached the host
        with _transport(plan) as transport:
            problems = _clean_up_after(session, plan, transport)
    note = "".join(f"\n{problem}" for problem in problems)
    services.run_fail(run_id=session.run.pk, outcome=outcome, reason=reason + note)


def _clean_up_after(session: services.RunSession, plan: RunPlan, transport: Transport) -> list[str]:
    leftovers = plan.leftovers.with_launched(session.launched_dirs())
    problems = cleanup.clean_up(transport, leftovers)
    if problems:
        services.host_cleanup_record(run=session.run, leftovers=leftovers, problem=problems[0])
    return problems


def _transport(plan: RunPlan | services.CleanupJob) -> Transport:
    if plan.target is None:
        return LocalTransport(plan.host_name)
    return open_transport(plan.target)


@shared_task(name="runners.clean_hosts")
def clean_hosts() -> None:
    """The janitor: retry each pending host cleanup until the run's processes are gone. One
    beat's work is bounded (an unreachable host costs a connect timeout); the rest waits."""
    deadline = time.monotonic() + settings.TOLLGATE_TASK_BUDGET_S
    for cleanup_id in services.host_cleanups_due():
        if time.monotonic() > deadline:
            break
        try:
            job = services.host_cleanup_claim(cleanup_id=cleanup_id)
        except (RunnerError, services.ServiceError) as error:  # e.g. an undecryptable key
            logger.warning("host cleanup %s: %s", cleanup_id, error)
            continue
        if job is None:  # done meanwhile, or another janitor holds it
            continue
        with _transport(job) as transport:
            problems = cleanup.clean_up(transport, job.leftovers)
        if services.host_cleanup_finish(job=job, problems=problems):
            logger.info("host %s: cleanup of %s done", job.host_name, job.leftovers.run_dir)


@shared_task(name="runners.prune_soaks")
def prune_soaks() -> None:
    """The janitor's retention: the planner's finished TTFT bands past their keep (one
    DELETE), then (docs/soak.md) the raw files of the windows that tell nothing, deleted from
    soaks whose evidence is sealed, a chunk at a time within one task budget; a soak left
    unfinished is taken up again by the next beat (each is claimed by id)."""
    deadline = time.monotonic() + settings.TOLLGATE_TASK_BUDGET_S
    services.ttft_bands_prune(keep_days=settings.TOLLGATE_PLANNER_BAND_KEEP_DAYS)
    for run_id in services.soaks_to_prune():
        left = deadline - time.monotonic()
        if left <= 0:
            break
        services.soak_prune(run_id=run_id, budget_s=left)


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


@shared_task(name="runners.retry_unreachable_runs")
def retry_unreachable_runs() -> None:
    """Poke each run whose next try after a transport outage is due."""
    for run_id in services.runs_due_for_retry():
        advance_run.delay(run_id)


@shared_task(name="runners.characterize_trace")
def characterize_trace(trace_id: int) -> None:
    """Characterise an uploaded trace once; a redelivered poke finds it claimed or done."""
    if services.trace_claim(trace_id):
        services.trace_characterize(trace_id)


@shared_task(name="runners.characterize_traces")
def characterize_traces() -> None:
    """Poke every trace still waiting with no live claim (a lost poke, a killed worker)."""
    for trace_id in services.traces_to_characterize():
        characterize_trace.delay(trace_id)


@shared_task(name="runners.render_report_pdf")
def render_report_pdf(pdf_id: int) -> None:
    """A decision's report PDF, rendered once; a redelivered poke finds it claimed or done."""
    if services.report_pdf_claim(pdf_id):
        # Imported here: the renderer loads WeasyPrint and its Pango libraries, which every
        # worker process (and every importer of this module) would otherwise pay at start-up.
        from gates.pages.report.page import stored_pdf_render

        stored_pdf_render(pdf_id)


@shared_task(name="runners.render_report_pdfs")
def render_report_pdfs() -> None:
    """Poke every report PDF still queued with no live claim (a lost poke, a killed worker)."""
    for pdf_id in services.report_pdfs_to_render():
        render_report_pdf.delay(pdf_id)


@shared_task(name="runners.render_library_pdf")
def render_library_pdf(publication_id: int) -> None:
    """A published report's public PDF, rendered once at approval; a redelivered poke (or a
    reader who came first) finds it stored. No sweep: a lost poke leaves it to the first reader."""
    from gates.pages.library.public import publication_pdf  # WeasyPrint: see render_report_pdf

    publication_pdf(publication_id)


@shared_task(name="runners.predict_run_ttft")
def predict_run_ttft(run_id: int) -> None:
    """A G3 run's predicted TTFT band, once; a second poke finds it recorded and does nothing."""
    services.run_ttft_prediction_record(run_id=run_id)


@shared_task(name="runners.predict_runs_ttft")
def predict_runs_ttft() -> None:
    """Poke every G3 run whose prediction a lost poke or a killed worker left unrecorded."""
    for run_id in services.runs_to_predict():
        predict_run_ttft.delay(run_id)


@shared_task(name="runners.predict_planner_ttft")
def predict_planner_ttft(prediction_id: int) -> None:
    """The planner page's TTFT band, once; a redelivered poke finds it claimed or done."""
    if services.ttft_band_claim(prediction_id):
        services.ttft_band_compute(prediction_id)


@shared_task(name="runners.predict_planner_ttfts")
def predict_planner_ttfts() -> None:
    """Poke every planner band still computing with no live claim."""
    for prediction_id in services.ttft_bands_to_compute():
        predict_planner_ttft.delay(prediction_id)


@shared_task(name="runners.deliver_alert")
def deliver_alert(alert_id: int) -> None:
    services.alert_deliver(alert_id=alert_id)


@shared_task(name="runners.deliver_alerts")
def deliver_alerts() -> None:
    for alert_id in services.alert_claim_due():
        services.alert_deliver(alert_id=alert_id)


@shared_task(name="runners.canary")
def canary() -> None:
    services.heartbeat_record(name="worker")


@shared_task(name="runners.escalate_alerts")
def escalate_alerts() -> None:
    services.alerts_escalate()


class HeartbeatScheduler(PersistentScheduler):
    """The beat's own scheduler, writing the "beat" heartbeat as it ticks, so the dead-man
    switch tells a dead beat from a dead worker (a task would prove only the worker alive)."""

    _last_heartbeat = float("-inf")

    def tick(self, *args, **kwargs) -> float:
        interval = super().tick(*args, **kwargs)
        every_s = float(settings.TOLLGATE_BEAT_HEARTBEAT_S)
        now = time.monotonic()
        if now - self._last_heartbeat >= every_s:
            self._last_heartbeat = now
            try:
                close_old_connections()
                services.heartbeat_record(name="beat")
            except DatabaseError:  # a database outage must not stop the schedule itself
                logger.warning("beat heartbeat not written", exc_info=True)
        return min(interval, every_s)


@shared_task(name="runners.tick_soaks")
def tick_soaks() -> None:
    """Beat: poke one collector tick per soak that is due and not poked already. The message
    expires when the poke does: one that waited longer is dropped and the next sweep sends a
    fresh one, so a lagging queue never holds two ticks for one soak."""
    for run_id in services.soaks_due():
        tick_soak.apply_async((run_id,), expires=settings.TOLLGATE_SOAK_POKE_S)


@shared_task(name="runners.tick_soak")
def tick_soak(run_id: int) -> None:
    """One collector tick of a soak: claim it, read its host, record. A transport error only
    means "try next tick" (the service ends the run once the soak was unobserved too long).
    Ticks reuse this process's connection to the host: a new one per tick was the limit."""
    tick = services.soak_tick_claim(run_id)
    if tick is None:  # ended, or another tick reads it right now
        return
    try:
        with _soak_transport(tick.plan) as transport, tempfile.TemporaryDirectory() as scratch:
            found = soak_host.tick(transport, tick.host, Path(scratch))
            logger.info("soak %s: %s", run_id, services.soak_tick_record(tick, found))
            _clean_up_if_ended(transport, tick.plan, run_id)
    except RunnerError as error:
        logger.info("soak %s: %s", run_id, services.soak_tick_unreachable(tick, str(error)))
    finally:
        services.soak_tick_release(tick)


def _soak_transport(plan: RunPlan) -> contextlib.AbstractContextManager[Transport]:
    if plan.target is None:
        return LocalTransport(plan.host_name)
    return pooled_transport(plan.target)


def _clean_up_if_ended(transport: Transport, plan: RunPlan, run_id: int) -> None:
    """An ended soak leaves nothing on the host: the agent (and any server it left) stopped,
    then its run directory removed. The run ends only after the agent exited and every line
    it wrote was stored, or when nothing more will be stored (canceled, infra_error). What
    cannot be removed now is left to the janitor."""
    # Asked of the ended runs only: a running soak's tick reads no row for nothing.
    run = Run.objects.filter(pk=run_id, state__in=Run.ENDED).first()
    if run is None:
        return
    leftovers = plan.leftovers.with_launched(services.run_remote_dirs(run))
    problems = cleanup.clean_up(transport, leftovers)
    if problems:
        services.host_cleanup_record(run=run, leftovers=leftovers, problem=problems[0])
