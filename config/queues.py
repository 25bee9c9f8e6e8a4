"""Celery's queues by kind of work, the task each one carries, and the beat's schedule, so a
run-driving task (45 s) never delays a soak tick or an alert. settings.py takes both from here;
docker-compose.yml runs a worker per kind; the tests' and the demo's workers consume every queue.
Imports nothing but the standard library (settings.py imports it)."""

from __future__ import annotations

TICKS = "ticks"  # soak collector ticks: short, one per soak every TOLLGATE_SOAK_TICK_S
RUNS = "runs"  # driving runs, and the sweeps that poke, reap and clean up after them
ALERTS = "alerts"  # delivery and escalation: an on-call person waits on these
EVIDENCE = "evidence"  # reading what customers uploaded (trace characterisation), minutes long

QUEUE_OF_TASK = {
    "runners.tick_soaks": TICKS,
    "runners.tick_soak": TICKS,
    "runners.advance_run": RUNS,
    "runners.redispatch_runs": RUNS,
    "runners.reap_stale_runs": RUNS,
    "runners.retry_unreachable_runs": RUNS,
    "runners.clean_hosts": RUNS,
    "runners.prune_soaks": RUNS,
    # The canary proves to the dead-man switch that the worker driving runs is alive.
    "runners.canary": RUNS,
    "runners.deliver_alert": ALERTS,
    "runners.deliver_alerts": ALERTS,
    "runners.escalate_alerts": ALERTS,
    "runners.characterize_trace": EVIDENCE,
    "runners.characterize_traces": EVIDENCE,
    # A G3 run's predicted TTFT band: up to a minute of the performance model, beside the run.
    "runners.predict_run_ttft": EVIDENCE,
    "runners.predict_runs_ttft": EVIDENCE,
    # The planner page's band: the same model, asked for from the form.
    "runners.predict_planner_ttft": EVIDENCE,
    "runners.predict_planner_ttfts": EVIDENCE,
    # A decision's report PDF: charts through Kaleido, then WeasyPrint, 10-20 s, once.
    "runners.render_report_pdf": EVIDENCE,
    "runners.render_report_pdfs": EVIDENCE,
    "runners.render_library_pdf": EVIDENCE,
}
ALL_QUEUES = (TICKS, RUNS, ALERTS, EVIDENCE)
# A worker's `-Q` for every queue (the tests' workers, the demo's).
ALL_QUEUES_OPTION = ",".join(ALL_QUEUES)
TASK_ROUTES = {task: {"queue": queue} for task, queue in QUEUE_OF_TASK.items()}


def beat_schedule(every_s: float) -> dict[str, dict]:
    """The beat's sweeps, most every `every_s` seconds. Each expires after a minute or two of its
    intervals, the longer: in a queue that lags more than that, the older ones are dropped unrun
    since a later one does their work (a backlog sheds load instead of repeating it), and a
    worker freed after a long task (a run's 45 s) still finds one unexpired."""
    schedule = {
        "tick-soaks": min(every_s, 10.0),
        "reap-stale-runs": every_s,
        "redispatch-runs": every_s,
        "deliver-alerts": every_s,
        "clean-hosts": every_s,
        # Retention waits days after a seal: once a minute finds every soak in time.
        "prune-soaks": max(every_s, 60.0),
        # Often: an outage's retries back off from 1 s; the query finds only runs that are due.
        "retry-unreachable-runs": min(every_s, 5.0),
        "escalate-alerts": every_s,
        "characterize-traces": every_s,
        "predict-runs-ttft": every_s,
        "predict-planner-ttfts": every_s,
        "render-report-pdfs": every_s,
        "canary": min(60.0, every_s * 2),
    }
    return {
        name: {
            "task": "runners." + name.replace("-", "_"),
            "schedule": interval,
            "options": {"expires": sweep_expiry_s(interval)},
        }
        for name, interval in schedule.items()
    }


def sweep_expiry_s(interval_s: float) -> float:
    return max(2 * interval_s, 60.0)
