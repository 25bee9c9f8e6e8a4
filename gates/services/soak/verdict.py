"""A soak's verdict from its running summary: each tick folds the windows it stored into
`Soak.summary` and keeps the completed points as SoakPoint rows (gates/decisions/g4_summary.py),
and the provisional and final decisions read those, not every window: a tick costs the same at
window 10 and at window 25,920. The verifier folds every window of a bundle to the same result.
Written under the soak's row lock by gates.services.soak.ticks.
"""

from __future__ import annotations

from documents.decision import G4Decision
from documents.spec import G4Spec
from gates.decisions import EvidenceError, decide_gate
from gates.decisions.g4 import decide_g4_summary
from gates.decisions.g4_summary import (
    G4Summary,
    NeedsEveryWindow,
    Point,
    summary_fold,
    summary_start,
)
from gates.decisions.windows import parse_windows
from gates.models import Soak, SoakPoint, SoakSample
from gates.specs.validation import parse_spec
from runners.soak import timeline


def soak_summary_fold(soak: Soak, rows: list[SoakSample]) -> None:
    """Fold the new windows into the soak's summary and keep the points they completed, so
    re-judging reads the summary, not every window. A soak stored before summaries (or whose
    summary was lost) is folded from all its rows once."""
    if soak.summary is None or (rows and soak.summary.get("last_seq", -1) >= rows[0].seq):
        soak.summary = summary_start(parse_spec(dict(soak.run.spec.document), "G4"))
        SoakPoint.objects.filter(run_id=soak.run_id).delete()
        rows = list(soak.run.soak_samples.order_by("seq"))
    summary: G4Summary = soak.summary
    windows = [timeline.engine_window(*_as_window(row)) for row in rows]
    points = summary_fold(summary, parse_windows(windows))
    SoakPoint.objects.bulk_create(
        [
            SoakPoint(
                run_id=soak.run_id,
                series=point.series,
                position=point.position,
                seq=point.seq,
                at=point.at,
                value=point.value,
            )
            for point in points
        ]
    )


def soak_spec_in_force(soak: Soak) -> G4Spec:
    """The run's spec with the recorded extensions: what the verdict is judged against."""
    spec = parse_spec(dict(soak.run.spec.document), "G4")
    spec["duration_h"] = spec["duration_h"] + soak.extended_h
    return spec


def soak_decide(soak: Soak, *, ended_at: float | None = None) -> G4Decision:
    """The verdict from the soak's summary and its points (a read bounded by the planned
    length, however many windows are stored); from every window only when the span clips
    observed time the summary no longer holds piece by piece. Both give the same decision."""
    if soak.summary is None:
        soak_summary_fold(soak, [])
        Soak.objects.filter(pk=soak.pk).update(summary=soak.summary)
    summary: G4Summary = soak.summary
    ended = summary["last_end"] if summary["windows"] else soak.started
    if ended_at is not None and ended is not None:
        # The agent watched until it exited: a tail nobody recorded is unobserved time.
        ended = max(ended, ended_at)
    context = {
        "started_at": soak.started,
        "ended_at": ended,
        "block": summary["block"],
        "memory_stride": summary["memory_stride"],
    }
    spec = soak_spec_in_force(soak)
    try:
        result = decide_g4_summary(spec, summary, _points(soak), context)
    except (NeedsEveryWindow, EvidenceError):
        # A span that clips settled time, or points out of step with the summary: every window.
        result = decide_gate(spec, _every_window(soak), context)
    result["soak"] = {
        "compressed": soak.compressed,
        "extended_h": soak.extended_h,
        "gaps": soak.gaps,
        "notes": soak.notes,
        "stop_reason": soak.stop_reason,
        "agent_generations": soak.generation,
        "health": soak.health,
    }
    return result


def _points(soak: Soak) -> list[Point]:
    rows = SoakPoint.objects.filter(run_id=soak.run_id).order_by("series", "position")
    return [Point(*row) for row in rows.values_list("series", "position", "seq", "at", "value")]


def _every_window(soak: Soak) -> list[dict]:
    samples = soak.run.soak_samples.order_by("seq").values_list(
        "seq", "window_start", "window_end", "metrics"
    )
    return [
        timeline.engine_window(seq, start.timestamp(), end.timestamp(), metrics)
        for seq, start, end, metrics in samples
    ]


def _as_window(sample: SoakSample) -> tuple[int, float, float, dict]:
    return (
        sample.seq,
        sample.window_start.timestamp(),
        sample.window_end.timestamp(),
        sample.metrics,
    )
