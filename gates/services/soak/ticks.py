"""G4 soaks: the collector's side. A beat tick per active soak claims it, the worker reads the
host (runners.soak.host), and this records what came back: windows as SoakSample rows (unique run
+ seq, so a repeated or concurrent read changes nothing), their raw files as artifacts (through
gates.services.runs.results), the gaps, the provisional verdict, and the end: a decision, or
infra_error when the agent was gone longer than the spec allows. Stop and extend: soakcontrol.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from gates.decisions.g4_summary import summary_start
from gates.models import Run, Soak, SoakSample
from gates.services.runs.lifecycle import (
    decision_record,
    run_assert_lease,
    run_fail,
    run_mark_canceled,
)
from gates.services.runs.results import run_artifacts_store
from gates.services.runs.workorder import run_execution
from gates.services.soak.verdict import soak_decide, soak_summary_fold
from gates.specs.validation import parse_spec
from runners.program.workorder import RunPlan
from runners.soak import collector, fitness, timeline

MAX_AGENT_GENERATIONS = 4
# The agent's exit codes (runners/soak/agent.py) that end a soak without a verdict.
AGENT_EXIT_DISK, AGENT_EXIT_SERVER = 4, 3


@dataclass(frozen=True)
class SoakTick:
    """A claimed tick: the soak's run, the claim (`token`), the run's work order, and the
    collector's view of the host that runners.soak.host.tick reads with (`host`)."""

    run_id: int
    token: str
    plan: RunPlan
    host: collector.TickState


def soak_begin(*, run: Run, detail: dict) -> Soak:
    """The soak step launched the agent: from now on the collector ticks watch the run."""
    spec = run.spec.document
    soak, _ = Soak.objects.get_or_create(
        run=run,
        defaults={
            "run_dir": detail["soak_run_dir"],
            "agent_sha256": detail["agent_sha256"],
            "compressed": spec["duration_h"] < 1,
            "next_tick_at": timezone.now(),
            "summary": summary_start(parse_spec(dict(spec), "G4")),
        },
    )
    return soak


def soaks_due(*, limit: int = 1000) -> list[int]:
    """Run ids of soaks whose next tick is due (never ticked counts as due) and for which no
    tick message may still be waiting; each is marked poked for TOLLGATE_SOAK_POKE_S. So when
    the queue lags, the beat sends nothing more for a soak already poked: load is shed, not
    piled up. Skips rows another beat locks (never two beats, but a slow sweep must not wait)."""
    now = timezone.now()
    due = (
        Soak.objects.filter(
            state__in=(Soak.State.ACTIVE, Soak.State.STOPPING), run__state=Run.State.RUNNING
        )
        .filter(_tick_due(now))
        .filter(Q(poked_until__isnull=True) | Q(poked_until__lte=now))
    )
    with transaction.atomic():
        picked = list(
            due.select_for_update(skip_locked=True, of=("self",))
            .order_by("next_tick_at")
            .values_list("run_id", flat=True)[:limit]
        )
        until = now + timedelta(seconds=settings.TOLLGATE_SOAK_POKE_S)
        Soak.objects.filter(run_id__in=picked).update(poked_until=until)
    return picked


def _tick_due(now: datetime) -> Q:
    return Q(next_tick_at__isnull=True) | Q(next_tick_at__lte=now)


def soak_tick_claim(run_id: int) -> SoakTick | None:
    """Claim the soak for one tick: a conditional UPDATE that also needs the tick due, so of
    two ticks at once one reads, and a duplicate or late message for a tick already done (its
    release moved next_tick_at on) does nothing."""
    now = timezone.now()
    token = str(uuid.uuid4())
    free = Q(tick_until__isnull=True) | Q(tick_until__lt=now)
    claimed = (
        Soak.objects.filter(free, _tick_due(now), run_id=run_id, run__state=Run.State.RUNNING)
        .exclude(state=Soak.State.ENDED)
        .update(
            tick_token=token,
            tick_until=now + timedelta(seconds=settings.TOLLGATE_SOAK_TICK_CLAIM_S),
        )
    )
    if claimed != 1:
        return None
    soak = Soak.objects.select_related(
        "run__spec", "run__host__profile", "run__gate__engagement"
    ).get(run_id=run_id)
    return _tick_input(soak, token)


def _tick_input(soak: Soak, token: str) -> SoakTick:
    run = soak.run
    plan = run_execution(run, inventory=False)
    paths = collector.SoakPaths(soak.run_dir)
    wanted = soak.deadline_wanted if soak.deadline_wanted != soak.deadline else None
    host = collector.TickState(
        paths=paths,
        python=plan.values.get("python", "python3"),
        token=plan.token,
        generation=soak.generation,
        offset=soak.offset,
        ack_seq=soak.last_seq,
        stop=soak.state == Soak.State.STOPPING,
        deadline=wanted,
        cancel=run.cancel_requested_at is not None,
        may_relaunch=soak.state == Soak.State.ACTIVE and soak.generation < MAX_AGENT_GENERATIONS,
        config=_relaunch_config(soak, plan, paths),
    )
    return SoakTick(run_id=run.pk, token=token, plan=plan, host=host)


def _relaunch_config(soak: Soak, plan: RunPlan, paths: collector.SoakPaths) -> dict:
    """A relaunched agent's config: numbering and clock go on from what was stored, even when
    the host lost the data directory (a reboot that wiped /tmp)."""
    config = collector.agent_config(soak.run.spec.document, plan.commands, plan.values, paths)
    config["first_seq"] = soak.last_seq + 1
    if soak.started is not None and soak.deadline is not None:
        config["started"], config["deadline"] = soak.started, soak.deadline_wanted or soak.deadline
    return config


def soak_tick_release(tick: SoakTick) -> None:
    """Hand the soak back and schedule its next tick (the beat may poke it again then)."""
    Soak.objects.filter(run_id=tick.run_id, tick_token=tick.token).update(
        tick_until=None,
        poked_until=None,
        next_tick_at=timezone.now() + timedelta(seconds=settings.TOLLGATE_SOAK_TICK_S),
    )


def soak_tick_record(tick: SoakTick, report: collector.TickOutcome) -> str:
    """Store what the tick read and move the soak on; returns what happened, for the log."""
    read = report.read
    with transaction.atomic():
        soak = _lock_running(tick.run_id)
        if soak is None:
            return "ended"
        if report.killed:
            return _end_canceled(soak)
        rows = _store_windows(soak, read.windows)
        _note_contact(soak, read, report)
        soak.save(update_fields=_RECORDED_FIELDS)
        if soak.health.get("fault"):
            # Before any verdict: a window the host spoiled is no product failure.
            return _infra_error(soak, soak.health["fault"])
        return _next_move(soak, read, report, rows)


# What _store_windows and _note_contact change: the rest of the row (run_dir, the provisional
# verdict, the claim's fields) is not rewritten by each tick.
_RECORDED_FIELDS = (  # noqa: SIM905 (one per line would push the module past 400 lines)
    "gaps last_seq summary health offset last_contact_at unreachable_since heartbeat_age_s "
    "started deadline deadline_wanted agent_exit generation notes"
).split()


def soak_tick_unreachable(tick: SoakTick, problem: str) -> str:
    """The host could not be read this tick: try again next tick, until the soak has been
    unobserved for longer than it may be; then the run ends as infra_error, never a fail."""
    with transaction.atomic():
        soak = _lock_running(tick.run_id)
        if soak is None:
            return "ended"
        now = timezone.now()
        soak.unreachable_since = soak.unreachable_since or now
        soak.save(update_fields=["unreachable_since"])
        away = (now - soak.unreachable_since).total_seconds()
        allowed = _unreachable_allowance_s(soak)
    if away > allowed:
        return _infra_error(
            soak, f"the host was unreachable for {away:.0f} s (allowed {allowed:.0f} s): {problem}"
        )
    return f"unreachable for {away:.0f} s: {problem}"


def _lock_running(run_id: int) -> Soak | None:
    soak = (
        Soak.objects.select_for_update()
        .select_related("run__spec")
        .filter(run_id=run_id, run__state=Run.State.RUNNING)
        .exclude(state=Soak.State.ENDED)
        .first()
    )
    if soak is not None:
        run_assert_lease(soak.run)
    return soak


def _store_windows(soak: Soak, windows: list[collector.Window]) -> list[SoakSample]:
    """Insert the new windows (returned, as built); a seq already stored is skipped by the
    unique constraint."""
    fresh = [window for window in windows if window.seq > soak.last_seq]
    if not fresh:
        return []
    previous = _last_window(soak)
    rows = [
        SoakSample.of_window(
            run_id=soak.run_id,
            seq=window.seq,
            window_start=_when(window.line["start"]),
            window_end=_when(window.line["end"]),
            metrics=collector.window_sample(window),
        )
        for window in fresh
    ]
    SoakSample.objects.bulk_create(rows, ignore_conflicts=True)
    run_artifacts_store(
        run_id=soak.run_id,
        artifacts=[artifact for window in fresh for artifact in collector.window_artifacts(window)],
    )
    chain = [previous] if previous else []
    # The stored (microsecond) times, as the decision reads them: a verifier re-finds the gaps.
    chain += [_as_window(row) for row in rows]
    soak.gaps = [*soak.gaps, *timeline.find_gaps(chain)]
    soak.last_seq = max(soak.last_seq, fresh[-1].seq)
    soak_summary_fold(soak, rows)
    _watch_health(soak, rows)
    return rows


def _last_window(soak: Soak) -> tuple[int, float, float, dict] | None:
    """The last stored window as find_gaps reads it: only what a gap's cause needs of its
    metrics, not the whole row (a model instance and all its JSON each tick)."""
    fields = ("seq", "window_start", "window_end", "metrics__boot_id", "metrics__agent_pid")
    last = soak.run.soak_samples.order_by("-seq").values_list(*fields).first()
    if last is None:
        return None
    seq, start, end, boot_id, agent_pid = last
    return seq, start.timestamp(), end.timestamp(), {"boot_id": boot_id, "agent_pid": agent_pid}


def _watch_health(soak: Soak, rows: list[SoakSample]) -> None:
    """Fold the new windows into the soak's health (in seq order, each once). The first
    window that shows the host unfit to measure is its `fault`: it ends the soak."""
    run = soak.run
    health = soak.health or {"since": (run.started_at or run.created_at).timestamp()}
    for row in rows:
        health, faults = fitness.health_fold(health, row.seq, row.metrics.get("health"))
        if faults:
            health["fault"] = fitness.fault_reason(row.seq, faults)
            break
    soak.health = health


def _as_window(sample: SoakSample) -> tuple[int, float, float, dict]:
    return (
        sample.seq,
        sample.window_start.timestamp(),
        sample.window_end.timestamp(),
        sample.metrics,
    )


def _note_contact(soak: Soak, read: collector.Read, report: collector.TickOutcome) -> None:
    soak.offset = max(soak.offset, read.offset)
    soak.last_contact_at, soak.unreachable_since = timezone.now(), None
    soak.heartbeat_age_s = None if read.heartbeat is None else max(read.now - read.heartbeat, 0)
    soak.started = read.started or soak.started
    if read.deadline is not None:
        soak.deadline = read.deadline
        if soak.deadline_wanted is None or soak.deadline_wanted == read.deadline:
            soak.deadline_wanted = read.deadline
    soak.agent_exit = read.exit
    if report.relaunched:
        soak.generation = report.relaunched
        text = f"agent relaunched as generation {report.relaunched}: {report.cause}"
        soak.notes = [*soak.notes, _note(text)]


def _note(text: str) -> dict:
    return {"at": timezone.now().isoformat(), "note": text}


def _next_move(
    soak: Soak, read: collector.Read, report: collector.TickOutcome, rows: list[SoakSample]
) -> str:
    if read.exit is not None and not read.windows:
        return _finish(soak, read.exit)
    lost = not (report.agent_running or report.relaunched or read.windows)
    if lost and read.exit is None:
        return _infra_error(soak, f"the agent is gone and was not relaunched: {report.cause}")
    unobserved = _unobserved_s(soak, read, agent_down=not report.agent_running)
    if unobserved > _unreachable_allowance_s(soak):
        return _infra_error(
            soak, f"nobody observed the soak for {unobserved:.0f} s, more than the spec allows"
        )
    stored = len(rows)
    if stored and _provisional_due(soak, read.windows, rows):
        soak.provisional = {**soak_decide(soak), "computed_at": read.now}
        soak.save(update_fields=["provisional"])
        if soak.provisional["verdict"] == "fail" and soak.state == Soak.State.ACTIVE:
            reasons = "; ".join(soak.provisional["reasons"])
            soak.state, soak.stop_reason = Soak.State.STOPPING, f"early stop: {reasons}"
            soak.save(update_fields=["state", "stop_reason"])
            return f"stored {stored}; {soak.stop_reason}"
    return f"stored {stored} window(s)"


def _provisional_due(soak: Soak, fresh: list[collector.Window], rows: list[SoakSample]) -> bool:
    """Re-judge the soak when a new window shows trouble (a crash, failed requests: the early
    stop must not wait), else at most every TOLLGATE_SOAK_PROVISIONAL_S: re-judging reads the
    summary (about 80 ms at the end of a 72 h soak of 10 s windows), a tick stays far below."""
    if soak.provisional is None:
        return True
    if any(window.line.get("crashed") for window in fresh):
        return True
    if any(_failed_requests(soak, fresh, rows)):
        return True
    last = soak.provisional.get("computed_at") or 0
    return fresh[-1].line["end"] - last >= settings.TOLLGATE_SOAK_PROVISIONAL_S


def _failed_requests(soak: Soak, read: list[collector.Window], rows: list[SoakSample]) -> list:
    """The `failed` count of each window read: from the rows this tick just built, and only
    for a window stored by an earlier tick (a repeated read) from the database."""
    built = {row.seq for row in rows}
    earlier = [window.seq for window in read if window.seq not in built]
    stored = soak.run.soak_samples.filter(seq__in=earlier) if earlier else SoakSample.objects.none()
    metrics = [row.metrics for row in rows] + list(stored.values_list("metrics", flat=True))
    return [(sample or {}).get("failed") for sample in metrics]


def _unobserved_s(soak: Soak, read: collector.Read, *, agent_down: bool) -> float:
    """Gaps so far, plus the time since the last window while no agent is recording."""
    total = sum(gap["seconds"] for gap in soak.gaps)
    if agent_down and read.exit is None:
        last = soak.run.soak_samples.order_by("-seq").values_list("window_end", flat=True).first()
        since = last.timestamp() if last is not None else soak.started
        total += max(read.now - since, 0.0) if since is not None else 0.0
    return total


def _unreachable_allowance_s(soak: Soak) -> float:
    """The spec's unobserved allowance, but never less than the operator's floor: a short SSH
    outage must not end a compressed soak whose whole allowance is a second."""
    spec = soak.run.spec.document
    return max(timeline.unobserved_allowance_s(spec), float(settings.TOLLGATE_SOAK_UNREACHABLE_S))


def _finish(soak: Soak, exit_info: dict) -> str:
    code, reason = exit_info.get("code"), exit_info.get("reason", "")
    if code == AGENT_EXIT_DISK:
        return _infra_error(soak, f"the agent stopped cleanly: {reason}")
    if code == AGENT_EXIT_SERVER and not soak.run.soak_samples.exists():
        return _fail(soak, Run.Outcome.BENCHMARK_ERROR, f"the soak agent: {reason}")
    result = soak_decide(soak, ended_at=exit_info.get("at"))
    result["soak"]["agent_exit"] = exit_info
    soak.state, soak.provisional = Soak.State.ENDED, None
    soak.save(update_fields=["state", "provisional"])
    decision_record(run_id=soak.run_id, result=result)
    return f"decided {result['verdict']}"


def _end_canceled(soak: Soak) -> str:
    soak.state = Soak.State.ENDED
    soak.save(update_fields=["state"])
    run_mark_canceled(run_id=soak.run_id, reason="canceled by request; the soak agent was stopped")
    return "canceled"


def _infra_error(soak: Soak, reason: str) -> str:
    return _fail(soak, Run.Outcome.INFRA_ERROR, reason)


def _fail(soak: Soak, outcome: str, reason: str) -> str:
    Soak.objects.filter(pk=soak.pk).update(state=Soak.State.ENDED)
    run_fail(run_id=soak.run_id, outcome=outcome, reason=reason)
    return f"{outcome}: {reason}"


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
