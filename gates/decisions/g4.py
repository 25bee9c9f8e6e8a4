"""G4 stability soak: crashes, error rate, throughput drift and TTFT p99 change between change-point
segments (ruptures), memory growth (Theil-Sen) and unobserved time. Pure: a typed spec and plain
windows in, a typed decision out; imports no Django.
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

import numpy as np
from scipy import stats

from documents.cell import RowVerdict
from documents.decision import (
    ChangePoint,
    G4Check,
    G4Decision,
    G4Limits,
    G4Numbers,
    G4Span,
)
from documents.spec import G4Spec
from gates.decisions.changepoints import MIN_SEGMENT_WINDOWS, change_points
from gates.decisions.g4_summary import (
    HIT_FLOOR,
    MAX_SLOPE_SAMPLES,
    G4Summary,
    NeedsEveryWindow,
    Point,
    memory_points,
    observed_seconds,
    series_points,
    summary_empty,
    summary_fold,
    summary_start,
)
from gates.decisions.validity import read_count
from gates.decisions.windows import Window, parse_span, parse_windows

MEMORY_CONFIDENCE = 0.90
MIB = 2**20


def decide_g4(spec: G4Spec, windows: Any, context: Any = None) -> G4Decision:
    """The G4 verdict over soak windows; context may give {"started_at", "ended_at"} (unix s)
    and the summary's {"block", "memory_stride"} the soak was collected with (default: from
    the spec). Folds every window into a fresh summary and decides from it, exactly as the
    collector does one tick at a time (decide_g4_summary)."""
    items = parse_windows(windows)
    summary = _summary_for(spec, context)
    points = summary_fold(summary, items)
    return decide_g4_summary(spec, summary, points, context, windows=items)


def _summary_for(spec: G4Spec, context: Any) -> G4Summary:
    planned = summary_start(spec)
    if not isinstance(context, dict):
        return planned
    block = read_count(context, "block", "context")
    stride = read_count(context, "memory_stride", "context")
    return summary_empty(
        block=int(block) if block is not None else planned["block"],
        memory_stride=int(stride) if stride is not None else planned["memory_stride"],
    )


def decide_g4_summary(
    spec: G4Spec,
    summary: G4Summary,
    points: list[Point],
    context: Any = None,
    *,
    windows: list[Window] | None = None,
) -> G4Decision:
    """The G4 verdict from a soak's summary and its points. Raises NeedsEveryWindow when the
    span clips observed time the summary no longer holds piece by piece and `windows` (every
    window, in seq order) was not given."""
    limits = _limits(spec, summary)
    started, ended = parse_span(context, summary["span_low"], summary["span_high"])
    if not summary["windows"]:
        return _result(spec, limits, "inconclusive", ["no soak windows were collected"], [], None)
    span: G4Span = {
        "started_at": started,
        "ended_at": ended,
        "duration_s": limits["duration_s"],
        "observed_s": ended - started,
    }
    finished = ended >= started + limits["duration_s"] - limits["window_s"]
    rows = [
        _crash_row(summary["crashed"], limits["max_crashes"]),
        _error_row(summary, limits["max_error_rate_pct"]),
        _level_row(
            "throughput_drift",
            summary,
            series_points(summary, points, "output_throughput"),
            -1,
            limits["max_throughput_drift_pct"],
        ),
        _level_row(
            "ttft_p99_change",
            summary,
            series_points(summary, points, "ttft_p99_ms"),
            1,
            limits["max_ttft_p99_change_pct"],
        ),
        _memory_row(memory_points(summary, points), limits["max_memory_growth_mib_per_h"]),
        _unobserved_row(summary, windows, span, limits["max_unobserved_pct"]),
    ]
    hits = _hit_row(summary, series_points(summary, points, "external_hit_rate"))
    if hits is not None:
        rows.append(hits)
    if not finished:
        _mark_unfinished(rows, span, summary["windows"], limits["window_s"])
    verdict = _combine([row["verdict"] for row in rows])
    reasons = [f"{row['check']}: {row['cause']}" for row in rows if row["verdict"] == verdict]
    return _result(spec, limits, verdict, reasons, rows, span)


def _result(
    spec: G4Spec,
    limits: G4Limits,
    verdict: RowVerdict,
    reasons: list[str],
    rows: list[G4Check],
    span: G4Span | None,
) -> G4Decision:
    return {
        "gate": "G4",
        "spec_version": spec.get("version"),
        "verdict": verdict,
        "reasons": reasons,
        "clauses": rows,
        "validity": [],
        "inputs": {"limits": limits, "span": span},
    }


def _combine(verdicts: list[RowVerdict]) -> RowVerdict:
    worst: tuple[RowVerdict, ...] = ("invalid", "fail", "inconclusive")
    for verdict in worst:
        if verdict in verdicts:
            return verdict
    return "pass"


def _mark_unfinished(rows: list[G4Check], span: G4Span, windows: int, window_s: float) -> None:
    """Before the end only what cannot recover stays failed: a crash count (it can only grow)
    and an error rate the remaining windows cannot bring back under its limit. Everything else
    is inconclusive so far; the soak is stopped early on what stays failed."""
    done = f"soak ran {span['observed_s'] / 3600:.2f} of {span['duration_s'] / 3600:.2f} h"
    remaining = max(span["duration_s"] - span["observed_s"], 0.0) / max(window_s, 1e-9)
    for row in rows:
        if row["verdict"] == "fail" and _final(row, windows, remaining):
            continue
        row["verdict"], row["cause"] = "inconclusive", f"{done}; so far: {row['cause']}"


def _final(row: G4Check, windows: int, remaining_windows: float) -> bool:
    if row["check"] == "crashes":
        return True
    return row["check"] == "error_rate" and _beyond_recovery(row, windows, remaining_windows)


def _beyond_recovery(row: G4Check, windows: int, remaining_windows: float) -> bool:
    """Even if every request of the remaining windows (at the rate seen so far) succeeded, the
    error rate would stay over its limit."""
    counted = row["completed"] + row["failed"]
    best = 100 * row["failed"] / (counted + remaining_windows * counted / max(windows, 1))
    if best <= row["limit"]:
        return False
    row["best_possible_pct"] = best
    row["cause"] += (
        f"; beyond recovery: with no failure in the ~{remaining_windows:.0f} remaining windows "
        f"it would still be {best:.3f} %"
    )
    return True


class _HitSummary(TypedDict):
    min: float
    median: float
    windows: int


def _hit_row(summary: G4Summary, blocks: list[Point]) -> G4Check | None:
    """The offload tier's external hit rate per window: a tier that stops being hit (the last
    windows at ~0 after earlier hits) is a product finding; one never hit means the soak never
    exercised offload. None when no window reports a hit rate (e.g. uploaded windows). The
    median is that of the blocks' medians (of the windows themselves for soaks of up to
    MAX_CPD_POINTS planned windows)."""
    hits = summary["hits"]
    if not hits["count"] or hits["low"] is None or hits["high"] is None:
        return None
    stats_: _HitSummary = {
        "min": hits["low"],
        "median": float(np.median([point.value for point in blocks])),
        "windows": hits["count"],
    }
    if hits["high"] < HIT_FLOOR:
        cause = f"the offload tier was never hit in {hits['count']} window(s)"
        return _row("offload_hits", "invalid", hits["high"], HIT_FLOOR, cause, **stats_)
    if hits["tail"] >= MIN_SEGMENT_WINDOWS:
        seq, start = hits["tail_seq"], hits["tail_start"]
        assert seq is not None and start is not None and hits["first_start"] is not None
        hour = (start - hits["first_start"]) / 3600
        cause = (
            f"the offload tier stopped being hit at hour {hour:.2f} (window {seq}) and stayed so"
        )
        return _row(
            "offload_hits",
            "fail",
            0.0,
            HIT_FLOOR,
            cause,
            stopped_seq=seq,
            stopped_hour=hour,
            **stats_,
        )
    cause = f"external hit rate median {stats_['median']:.3f}, lowest {stats_['min']:.3f}"
    return _row("offload_hits", "pass", stats_["median"], HIT_FLOOR, cause, **stats_)


def _row(
    check: str,
    verdict: RowVerdict,
    observed: float | None,
    limit: float,
    cause: str,
    **extra: Unpack[G4Numbers],
) -> G4Check:
    return {
        "check": check,
        "verdict": verdict,
        "observed": observed,
        "limit": limit,
        "cause": cause,
        **extra,
    }


def _crash_row(crashed: list[int], limit: int) -> G4Check:
    verdict: RowVerdict = "fail" if len(crashed) > limit else "pass"
    return _row(
        "crashes",
        verdict,
        len(crashed),
        limit,
        f"{len(crashed)} crash(es) (limit {limit})",
        crashed_windows=list(crashed),
    )


def _error_row(summary: G4Summary, limit: float) -> G4Check:
    completed, failed = summary["completed"], summary["failed"]
    if completed + failed == 0:
        return _row("error_rate", "inconclusive", None, limit, "no requests were counted")
    rate = 100 * failed / (completed + failed)
    verdict: RowVerdict = "pass" if rate <= limit else "fail"
    return _row(
        "error_rate",
        verdict,
        rate,
        limit,
        f"{failed:g} of {completed + failed:g} requests failed ({rate:.3f} %)",
        completed=completed,
        failed=failed,
    )


def _level_row(
    check: str,
    summary: G4Summary,
    blocks: list[Point],
    worse: int,
    limit: float,
) -> G4Check:
    """Worst later segment level against the first segment, in percent; `worse` is the sign
    of a harmful change (-1: a drop in throughput hurts, +1: a rise in latency hurts). The
    series is the summary's blocks (each window for soaks of up to MAX_CPD_POINTS planned
    windows; crashed windows left out); a segment's level is the median of its blocks."""
    if len(blocks) < 2:
        usable = len(blocks) * summary["block"]
        return _row(check, "inconclusive", None, limit, f"about {usable} usable window(s)")
    values = np.array([point.value for point in blocks])
    breaks = change_points(values)
    levels = [float(np.median(part)) for part in np.split(values, breaks)]
    if levels[0] <= 0:
        return _row(check, "inconclusive", None, limit, "the first segment has level 0")
    changes = [100 * (level / levels[0] - 1) for level in levels]
    worst = max(changes, key=lambda change: worse * change)
    harm = max(worse * worst, 0.0)
    first = summary["first_start"] or 0.0
    points: list[ChangePoint] = [
        {
            "seq": blocks[b].seq,
            "hour": round((blocks[b].at - first) / 3600, 4),
            "before": levels[i],
            "after": levels[i + 1],
        }
        for i, b in enumerate(breaks)
    ]
    verdict: RowVerdict = "pass" if harm <= limit else "fail"
    began = f", the first at hour {points[0]['hour']:.2f}" if points else ""
    cause = (
        f"{len(breaks)} change point(s){began}; worst segment {worst:+.2f} % against the first "
        f"(limit {limit:g} %)"
    )
    return _row(check, verdict, harm, limit, cause, levels=levels, change_points=points)


def _memory_row(kept: list[Point], limit: float) -> G4Check:
    """Memory growth by Theil-Sen over the kept samples (every `memory_stride`-th window's)."""
    samples = [(point.at, point.value) for point in kept]
    if len(samples) < 3 or len({time for time, _ in samples}) < 2:
        return _row(
            "memory_growth", "inconclusive", None, limit, f"{len(samples)} memory sample(s); need 3"
        )
    if len(samples) > MAX_SLOPE_SAMPLES:  # an extended soak: thin again, evenly
        keep = np.linspace(0, len(samples) - 1, MAX_SLOPE_SAMPLES).round().astype(int)
        samples = [samples[i] for i in keep]
    hours = np.array([time for time, _ in samples]) / 3600
    mib = np.array([value for _, value in samples]) / MIB
    slope, _, low, high = stats.theilslopes(mib, hours, alpha=MEMORY_CONFIDENCE)
    interval = f"[{low:.1f}, {high:.1f}] MiB/h at {MEMORY_CONFIDENCE:.0%}"
    numbers: G4Numbers = {
        "slope_low": float(low),
        "slope_high": float(high),
        "confidence": MEMORY_CONFIDENCE,
    }
    if high <= limit:
        return _row("memory_growth", "pass", float(slope), limit, f"growth {interval}", **numbers)
    if low > limit:
        return _row("memory_growth", "fail", float(slope), limit, f"growth {interval}", **numbers)
    return _row(
        "memory_growth",
        "inconclusive",
        float(slope),
        limit,
        f"growth {interval} straddles {limit:g} MiB/h",
        **numbers,
    )


def _unobserved_row(
    summary: G4Summary, windows: list[Window] | None, span: G4Span, limit: float
) -> G4Check:
    start = span["started_at"]
    stop = min(span["ended_at"], start + span["duration_s"])
    try:
        covered = observed_seconds(summary, start, stop)
    except NeedsEveryWindow:
        if windows is None:
            raise
        covered = _observed_in_full(windows, start, stop)
    total = max(stop - start, 1e-9)
    share = 100 * (1 - covered / total)
    # Nobody watched the product then: a gap is a measurement problem, never a product fail.
    verdict: RowVerdict = "pass" if share <= limit else "invalid"
    return _row(
        "unobserved",
        verdict,
        share,
        limit,
        f"{share:.2f} % of {total / 3600:.2f} h unobserved (limit {limit:g} %)",
    )


def _observed_in_full(windows: list[Window], start: float, stop: float) -> float:
    """observed_seconds over every window: the same pieces, each clipped to [start, stop]."""
    covered: float = 0.0
    reach: float | None = None
    for window in windows:
        low = window["start"] if reach is None else max(window["start"], reach)
        reach = window["end"] if reach is None else max(reach, window["end"])
        covered += max(min(window["end"], stop) - max(low, start), 0.0)
    return covered


def _limits(spec: G4Spec, summary: G4Summary) -> G4Limits:
    limits = spec["limits"]
    return {
        "block_windows": summary["block"],
        "memory_stride": summary["memory_stride"],
        "duration_s": spec["duration_h"] * 3600,
        "window_s": spec["window_min"] * 60,
        "max_crashes": limits["max_crashes"],
        "max_error_rate_pct": limits["max_error_rate_pct"],
        "max_throughput_drift_pct": limits["max_throughput_drift_pct"],
        "max_ttft_p99_change_pct": limits["max_ttft_p99_change_pct"],
        "max_memory_growth_mib_per_h": limits["max_memory_growth_mib_per_h"],
        "max_unobserved_pct": limits["max_unobserved_pct"],
    }
