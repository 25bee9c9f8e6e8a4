"""The Celery app bench/soak_fleet.py starts its workers with (`celery -A bench.soak_fleet_app`):
Tollgate's own app and tasks, unchanged, with a record of every soak tick task written by the
worker process that ran it, one JSON line each, to $TOLLGATE_FLEET_RECORDS/<pid>.jsonl: when it
started and ended, whether its claim won, when it released the soak (its next tick is due
TOLLGATE_SOAK_TICK_S later) and the process's CPU time it took (time.process_time: every
thread of the process, the SSH connections' included). A helper of the bench, not a bench."""

from __future__ import annotations

import cProfile
import json
import os
import time

from celery.signals import task_postrun, task_prerun

from config.celery import app

__all__ = ["app"]

_RECORDS = os.environ.get("TOLLGATE_FLEET_RECORDS", "")
# With TOLLGATE_FLEET_PROFILE set, each process profiles its tick tasks (cProfile) and writes
# the stats to <records>/<pid>.prof after every 20 ticks: where a tick's worker time goes. The
# task thread's CPU time, not wall time: a tick mostly waits (on the host, on PostgreSQL), and
# the waits hid the CPU in a wall-clock profile.
_PROFILE = cProfile.Profile(time.thread_time) if os.environ.get("TOLLGATE_FLEET_PROFILE") else None
_current: dict = {}
_done: list[int] = []


def _patch() -> None:
    """At the first task of each pool process (Django is set up by then): worker/tasks.py
    calls both through the gates.services module, so they are wrapped there and nowhere else."""
    from gates import services

    if getattr(services.soak_tick_claim, "recorded", False):
        return

    claim, release = services.soak_tick_claim, services.soak_tick_release

    def claim_recorded(run_id: int):
        tick = claim(run_id)
        _current.update(claimed=tick is not None, claim_at=time.time())
        return tick

    def release_recorded(tick) -> None:
        release(tick)
        _current["release_at"] = time.time()

    claim_recorded.recorded = True  # type: ignore[attr-defined]
    services.soak_tick_claim = claim_recorded
    services.soak_tick_release = release_recorded


@task_prerun.connect
def _began(task_id=None, task=None, args=None, **_) -> None:
    _current.clear()
    _patch()
    if task is not None and task.name == "runners.tick_soak":
        _current.update(run_id=args[0], start=time.time(), cpu=time.process_time())
        if _PROFILE is not None:
            _PROFILE.enable()


@task_postrun.connect
def _ended(task_id=None, task=None, retval=None, state=None, **_) -> None:
    if not _RECORDS or "run_id" not in _current:
        return
    if _PROFILE is not None:
        _PROFILE.disable()
    record = {
        **_current,
        "end": time.time(),
        "cpu": time.process_time() - _current["cpu"],
        "pid": os.getpid(),
        "state": state,
    }
    if state != "SUCCESS":
        record["error"] = repr(retval)[:500]
    with open(os.path.join(_RECORDS, f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps(record) + "\n")
    _done.append(1)
    if _PROFILE is not None and len(_done) % 20 == 0:
        _PROFILE.dump_stats(os.path.join(_RECORDS, f"{os.getpid()}.prof"))
