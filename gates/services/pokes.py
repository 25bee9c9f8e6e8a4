"""Pokes: the broker messages services send to the Celery tasks, by task name, after commit.

The database is the source of truth and a poke only says "look at row N", so services never
import worker.tasks (no import cycle): a task is named here as the beat schedule names it.
"""

from __future__ import annotations

from django.db import transaction

from config.celery import app

ADVANCE_RUN = "runners.advance_run"
DELIVER_ALERT = "runners.deliver_alert"
CHARACTERIZE_TRACE = "runners.characterize_trace"
PREDICT_RUN_TTFT = "runners.predict_run_ttft"
PREDICT_PLANNER_TTFT = "runners.predict_planner_ttft"
RENDER_REPORT_PDF = "runners.render_report_pdf"
RENDER_LIBRARY_PDF = "runners.render_library_pdf"


def send(task_name: str, *args: int) -> None:
    app.send_task(task_name, args=list(args))


def poke_on_commit(task_name: str, *args: int) -> None:
    """Send the poke once the transaction commits.

    robust: an unreachable broker must not undo or fail what was committed; the beat's sweeps
    (re-dispatch of runs nobody poked, delivery of due alerts) find the row and poke it later.
    """
    transaction.on_commit(lambda: send(task_name, *args), robust=True)
