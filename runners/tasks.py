"""Celery tasks: thin. Each loads by id, claims, calls services and programs, records.

The database is the source of truth; a message is only a poke, so every task is safe to run
twice. This and config/celery.py are the only modules that import Celery.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from gates import services
from gates.models import Run, ServiceHeartbeat

logger = logging.getLogger(__name__)


@shared_task(name="runners.deliver_alert")
def deliver_alert(alert_id: int) -> None:
    services.alert_deliver(alert_id=alert_id)


@shared_task(name="runners.deliver_alerts")
def deliver_alerts() -> None:
    for alert_id in services.alert_claim_due():
        services.alert_deliver(alert_id=alert_id)


@shared_task(name="runners.reap_stale_runs")
def reap_stale_runs() -> None:
    for run_id in services.runs_stale(older_than_s=settings.TOLLGATE_RUN_STALE_AFTER_S):
        logger.warning("run %s: no heartbeat, reaping as infra_error", run_id)
        services.run_fail(
            run_id=run_id,
            outcome=Run.Outcome.INFRA_ERROR,
            reason=f"no heartbeat for {settings.TOLLGATE_RUN_STALE_AFTER_S} s: "
            "the worker or the host was lost",
        )


@shared_task(name="runners.redispatch_runs")
def redispatch_runs() -> None:
    for run_id in services.runs_to_redispatch(older_than_s=60):
        advance_run.delay(run_id)


@shared_task(name="runners.canary")
def canary() -> None:
    ServiceHeartbeat.objects.update_or_create(name="worker", defaults={"at": timezone.now()})


@shared_task(name="runners.advance_run")
def advance_run(run_id: int) -> None:
    services.run_mark_dispatched(run_id=run_id)
    run = services.run_claim(run_id=run_id)
    if run is None:
        return
    services.run_fail(
        run_id=run_id,
        outcome=Run.Outcome.SPEC_ERROR,
        reason=f"this build has no program for {run.gate.kind} yet",
    )
