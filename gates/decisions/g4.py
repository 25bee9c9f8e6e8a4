"""G4 stability soak: crashes, error rate, throughput drift and TTFT p99 change between change-point
segments (ruptures), memory growth (Theil-Sen) and unobserved time. Pure: a typed spec and plain
windows in, a typed decision out; imports no Django.
"""

from __future__ import annotations

import math
from typing import Any, Literal, TypedDict, Unpack

import numpy as np
import ruptures
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
from gates.decisions.windows import Window, parse_span, parse_windows

# A shift must last this many windows to count as a change point rather than a blip.
MIN_SEGMENT_WINDOWS = 3
MEMORY_CONFIDENCE = 0.90
MAX_SLOPE_SAMPLES = 1000
MAX_CPD_POINTS = 2000
NOISE_FLOOR = 0.005  # relative to the median level
# Below this external hit rate a window did not use the offload tier.
HIT_FLOOR = 0.01
MIB = 2**20


def decide_g4(spec: G4Spec, windows: Any, context: Any = None) -> G4Decision:
    """The G4 verdict over soak windows; context may give {"started_at", "ended_at"} (unix s)."""
    limits = _limits(spec)
    items = parse_windows(windows)
    started, ended = parse_span(context, items)
    if not items:
        return _result(spec, limits, "inconclusive", ["no soak windows were collected"], [], None)
    span: G4Span = {
        "started_at": started,
        "ended_at": ended,
        "duration_s": limits["duration_s"],
        "observed_s": ended - started,
    }
    finished = ended >= started + limits["duration_s"] - limits["window_s"]
    rows = [
        _crash_row(items, limits["max_crashes"]),
        _error_row(items, limits["max_error_rate_pct"]),
        _level_row(
            "throughput_drift", items, "output_throughput", -1, limits["max_throughput_drift_pct"]
        ),
        _level_row("ttft_p99_change", items, "ttft_p99_ms", 1, limits["max_ttft_p99_change_pct"]),
        _memory_row(items, limits["max_memory_growth_mib_per_h"]),
        _unobserved_row(items, span, limits["max_unobserved_pct"]),
    ]
    hits = _hit_row(items)
    if hits is not None:
        rows.append(hits)
    if not finished:
        _mark_unfinished(rows, span, len(items), limits["window_s"])
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


def _hit_row(items: list[Window]) -> G4Check | None:
    """The offload tier's external hit rate per window: a tier that stops being hit (the last
    windows at ~0 after earlier hits) is a product finding; one never hit means the soak never
    exercised offload. None when no window reports a hit rate (e.g. uploaded windows)."""
    series = [
        (item["seq"], item["start"], rate)
        for item in items
        if (rate := item["external_hit_rate"]) is not None
    ]
    if not series:
        return None
    rates = [rate for _, _, rate in series]
    summary: _HitSummary = {
        "min": min(rates),
        "median": float(np.median(rates)),
        "windows": len(rates),
    }
    if max(rates) < HIT_FLOOR:
        cause = f"the offload tier was never hit in {len(rates)} window(s)"
        return _row("offload_hits", "invalid", max(rates), HIT_FLOOR, cause, **summary)
    tail = 0
    while tail < len(series) and series[-1 - tail][2] < HIT_FLOOR:
        tail += 1
    if tail >= MIN_SEGMENT_WINDOWS:
        seq, start, _ = series[-tail]
        hour = (start - series[0][1]) / 3600
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
            **summary,
        )
    cause = f"external hit rate median {summary['median']:.3f}, lowest {summary['min']:.3f}"
    return _row("offload_hits", "pass", summary["median"], HIT_FLOOR, cause, **summary)


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


def _crash_row(items: list[Window], limit: int) -> G4Check:
    crashed = [item["seq"] for item in items if item["crashed"]]
    verdict: RowVerdict = "fail" if len(crashed) > limit else "pass"
    return _row(
        "crashes",
        verdict,
        len(crashed),
        limit,
        f"{len(crashed)} crash(es) (limit {limit})",
        crashed_windows=crashed,
    )


def _error_row(items: list[Window], limit: float) -> G4Check:
    completed = sum(item["completed"] or 0 for item in items)
    failed = sum(item["failed"] or 0 for item in items)
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
    items: list[Window],
    key: Literal["output_throughput", "ttft_p99_ms"],
    worse: int,
    limit: float,
) -> G4Check:
    """Worst later segment level against the first segment, in percent; `worse` is the sign
    of a harmful change (-1: a drop in throughput hurts, +1: a rise in latency hurts)."""
    series = [
        (item["seq"], value)
        for item in items
        if not item["crashed"] and (value := item[key]) is not None
    ]
    if len(series) < 2:
        return _row(check, "inconclusive", None, limit, f"{len(series)} usable window(s) of {key}")
    values = np.array([value for _, value in series])
    breaks = change_points(values)
    levels = [float(np.median(part)) for part in np.split(values, breaks)]
    if levels[0] <= 0:
        return _row(check, "inconclusive", None, limit, f"first segment of {key} has level 0")
    changes = [100 * (level / levels[0] - 1) for level in levels]
    worst = max(changes, key=lambda change: worse * change)
    harm = max(worse * worst, 0.0)
    starts = {item["seq"]: item["start"] for item in items}
    first = items[0]["start"]
    points: list[ChangePoint] = [
        {
            "seq": series[b][0],
            "hour": round((starts[series[b][0]] - first) / 3600, 4),
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


def change_points(values: np.ndarray) -> list[int]:
    """Indices where the mean level shifts (PELT, l2 cost, BIC-like penalty on robust noise).

    Beyond MAX_CPD_POINTS windows (a 72 h soak of 10 s windows has 25,920) the search runs on
    medians of consecutive blocks: PELT's cost grows with the square of the points, and a
    shift shorter than a few blocks is not drift. Breaks map back to the block's first window.
    """
    if len(values) > MAX_CPD_POINTS:
        block = math.ceil(len(values) / MAX_CPD_POINTS)
        usable = len(values) // block * block
        medians = np.median(values[:usable].reshape(-1, block), axis=1)
        return [index * block for index in change_points(medians)]
    if len(values) < 2 * MIN_SEGMENT_WINDOWS:
        return []
    scale = float(np.median(np.abs(values))) or 1.0
    signal = values / scale
    # Noise from first differences with a robust scale, so the shifts themselves do not inflate it.
    noise = stats.median_abs_deviation(np.diff(signal), scale="normal") / math.sqrt(2)
    # Quantized values can give zero spread; below half a percent a shift is not worth a segment.
    noise = max(noise, NOISE_FLOOR)
    penalty = 2 * math.log(len(signal)) * noise**2
    # KernelCPD with a linear kernel is PELT with the l2 cost, implemented in C.
    model = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT_WINDOWS)
    found = model.fit(signal.reshape(-1, 1)).predict(pen=penalty)
    return [int(index) for index in found[:-1]]


def _memory_row(items: list[Window], limit: float) -> G4Check:
    samples = [
        ((item["start"] + item["end"]) / 2, memory)
        for item in items
        if (memory := item["memory_bytes"]) is not None
    ]
    if len(samples) < 3 or len({time for time, _ in samples}) < 2:
        return _row(
            "memory_growth", "inconclusive", None, limit, f"{len(samples)} memory sample(s); need 3"
        )
    if len(samples) > MAX_SLOPE_SAMPLES:  # Theil-Sen holds every pairwise slope in memory
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


def _unobserved_row(items: list[Window], span: G4Span, limit: float) -> G4Check:
    start = span["started_at"]
    stop = min(span["ended_at"], start + span["duration_s"])
    covered, reach = 0.0, start
    for item in sorted(items, key=lambda item: item["start"]):
        low, high = max(item["start"], reach), min(item["end"], stop)
        covered += max(high - low, 0.0)
        reach = max(reach, min(item["end"], stop))
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


def _limits(spec: G4Spec) -> G4Limits:
    limits = spec["limits"]
    return {
        "duration_s": spec["duration_h"] * 3600,
        "window_s": spec["window_min"] * 60,
        "max_crashes": limits["max_crashes"],
        "max_error_rate_pct": limits["max_error_rate_pct"],
        "max_throughput_drift_pct": limits["max_throughput_drift_pct"],
        "max_ttft_p99_change_pct": limits["max_ttft_p99_change_pct"],
        "max_memory_growth_mib_per_h": limits["max_memory_growth_mib_per_h"],
        "max_unobserved_pct": limits["max_unobserved_pct"],
    }
