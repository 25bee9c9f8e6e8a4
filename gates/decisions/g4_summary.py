"""The running summary a G4 verdict is decided from: counts, sums, the crashed windows, the
observed time, the hit-rate tail, and a bounded set of points (change-point blocks of the two
level series and of the hit rate, and every k-th memory sample). Folding a soak's windows into
it one tick at a time gives exactly the summary of folding them all at once, so the collector
re-judges a 72 h soak from the summary and its points (a cost bounded by the spec's planned
length, not by the windows stored so far) and the verifier, folding every window of a bundle,
reaches the same decision. Pure: JSON-ready dicts in and out; imports no Django.

The block size and the memory stride are fixed when the soak starts, from the spec's planned
windows, and recorded with the decision, so an extension or a verifier reading the spec in
force does not change how the same windows are summarised.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal, NamedTuple, TypedDict

from documents.spec import G4Spec
from gates.decisions.validity import EvidenceError
from gates.decisions.windows import Window

# A change-point search beyond this many points works on block medians (PELT's cost grows with
# the square of the points; a shift shorter than a few blocks is not drift).
MAX_CPD_POINTS = 2000
# Theil-Sen holds every pairwise slope in memory: at most this many memory samples.
MAX_SLOPE_SAMPLES = 1000
# The observed pieces kept one by one at the end, so the span's end can still clip them.
TAIL_PIECES = 64

LevelKey = Literal["output_throughput", "ttft_p99_ms"]
LEVEL_KEYS: tuple[LevelKey, ...] = ("output_throughput", "ttft_p99_ms")
BLOCK_SERIES = (*LEVEL_KEYS, "external_hit_rate")
MEMORY = "memory_bytes"
# Below this external hit rate a window did not use the offload tier.
HIT_FLOOR = 0.01


class Point(NamedTuple):
    """A block of a series (its first window's seq and start, the block's median), or a kept
    memory sample (its window's seq, mid time and bytes). `position` numbers a series' points."""

    series: str
    position: int
    seq: int
    at: float
    value: float


class Pending(TypedDict):
    """A series' block being filled: the windows' seqs, starts and values so far."""

    seqs: list[int]
    starts: list[float]
    values: list[float]
    blocks: int  # complete blocks emitted so far


class HitTail(TypedDict):
    count: int  # windows reporting a hit rate
    low: float | None
    high: float | None
    first_start: float | None  # the first such window's start
    tail: int  # trailing windows below HIT_FLOOR
    tail_seq: int | None  # the first of them
    tail_start: float | None


class Coverage(TypedDict):
    """Observed time as pieces [lo, hi] in seq order, each starting no earlier than the ends
    before it: `settled` sums the pieces that left `tail`, `settled_low` and `settled_high`
    bound them (a span that clips them needs every window: NeedsEveryWindow)."""

    reach: float | None
    settled: float
    settled_low: float | None
    settled_high: float | None
    tail: list[list[float]]


class G4Summary(TypedDict):
    version: int
    block: int
    memory_stride: int
    windows: int
    last_seq: int
    first_start: float | None
    last_end: float | None
    span_low: float | None
    span_high: float | None
    crashed: list[int]
    completed: float
    failed: float
    coverage: Coverage
    hits: HitTail
    pending: dict[str, Pending]
    memory_seen: int
    memory_kept: int


class NeedsEveryWindow(Exception):
    """The span clips observed time the summary no longer holds piece by piece: decide from
    every window instead (a span that starts after the first window, or ends well before the
    last)."""


def planned_windows(spec: G4Spec) -> int:
    return max(1, math.ceil(spec["duration_h"] * 60 / spec["window_min"]))


def summary_start(spec: G4Spec) -> G4Summary:
    """An empty summary for a soak under `spec`, its block and stride set from the planned
    windows (a 72 h soak of 10 s windows: blocks of 13 windows, every 26th memory sample)."""
    planned = planned_windows(spec)
    return summary_empty(
        block=max(1, math.ceil(planned / MAX_CPD_POINTS)),
        memory_stride=max(1, math.ceil(planned / MAX_SLOPE_SAMPLES)),
    )


def summary_empty(*, block: int, memory_stride: int) -> G4Summary:
    if block < 1 or memory_stride < 1:
        raise EvidenceError("summary", "block and memory stride must be at least 1")
    return {
        "version": 1,
        "block": block,
        "memory_stride": memory_stride,
        "windows": 0,
        "last_seq": -1,
        "first_start": None,
        "last_end": None,
        "span_low": None,
        "span_high": None,
        "crashed": [],
        "completed": 0,
        "failed": 0,
        "coverage": {
            "reach": None,
            "settled": 0.0,
            "settled_low": None,
            "settled_high": None,
            "tail": [],
        },
        "hits": {
            "count": 0,
            "low": None,
            "high": None,
            "first_start": None,
            "tail": 0,
            "tail_seq": None,
            "tail_start": None,
        },
        "pending": {
            key: {"seqs": [], "starts": [], "values": [], "blocks": 0} for key in BLOCK_SERIES
        },
        "memory_seen": 0,
        "memory_kept": 0,
    }


def summary_fold(summary: G4Summary, windows: list[Window]) -> list[Point]:
    """Fold windows (in increasing seq, each after the summary's last) into `summary` in place;
    returns the points they completed, to keep beside it."""
    points: list[Point] = []
    for window in windows:
        if window["seq"] <= summary["last_seq"]:
            raise EvidenceError(
                "windows", f"window {window['seq']} after window {summary['last_seq']}"
            )
        points += _fold_one(summary, window)
    return points


def _fold_one(summary: G4Summary, window: Window) -> list[Point]:
    summary["windows"] += 1
    summary["last_seq"] = window["seq"]
    if summary["first_start"] is None:
        summary["first_start"] = window["start"]
    summary["last_end"] = window["end"]
    low, high = summary["span_low"], summary["span_high"]
    summary["span_low"] = window["start"] if low is None else min(low, window["start"])
    summary["span_high"] = window["end"] if high is None else max(high, window["end"])
    if window["crashed"]:
        summary["crashed"].append(window["seq"])
    summary["completed"] += window["completed"] or 0
    summary["failed"] += window["failed"] or 0
    _cover(summary["coverage"], window["start"], window["end"])
    points: list[Point] = []
    for key in LEVEL_KEYS:
        value = window[key]
        if not window["crashed"] and value is not None:
            points += _add_to_block(summary, key, window, value)
    rate = window["external_hit_rate"]
    if rate is not None:
        _note_hit(summary["hits"], window, rate)
        points += _add_to_block(summary, "external_hit_rate", window, rate)
    memory = window["memory_bytes"]
    if memory is not None:
        if summary["memory_seen"] % summary["memory_stride"] == 0:
            middle = (window["start"] + window["end"]) / 2
            points.append(Point(MEMORY, summary["memory_kept"], window["seq"], middle, memory))
            summary["memory_kept"] += 1
        summary["memory_seen"] += 1
    return points


def _cover(coverage: Coverage, start: float, end: float) -> None:
    reach = coverage["reach"]
    low = start if reach is None else max(start, reach)
    coverage["tail"].append([low, end])
    coverage["reach"] = end if reach is None else max(reach, end)
    while len(coverage["tail"]) > TAIL_PIECES:
        piece_low, piece_high = coverage["tail"].pop(0)
        coverage["settled"] += max(piece_high - piece_low, 0.0)
        settled_low, settled_high = coverage["settled_low"], coverage["settled_high"]
        coverage["settled_low"] = piece_low if settled_low is None else settled_low
        coverage["settled_high"] = (
            piece_high if settled_high is None else max(settled_high, piece_high)
        )


def _note_hit(hits: HitTail, window: Window, rate: float) -> None:
    hits["count"] += 1
    hits["low"] = rate if hits["low"] is None else min(hits["low"], rate)
    hits["high"] = rate if hits["high"] is None else max(hits["high"], rate)
    if hits["first_start"] is None:
        hits["first_start"] = window["start"]
    if rate < HIT_FLOOR:
        if hits["tail"] == 0:
            hits["tail_seq"], hits["tail_start"] = window["seq"], window["start"]
        hits["tail"] += 1
    else:
        hits["tail"], hits["tail_seq"], hits["tail_start"] = 0, None, None


def _add_to_block(summary: G4Summary, key: str, window: Window, value: float) -> list[Point]:
    pending = summary["pending"][key]
    pending["seqs"].append(window["seq"])
    pending["starts"].append(window["start"])
    pending["values"].append(value)
    if len(pending["values"]) < summary["block"]:
        return []
    point = _block_point(key, pending)
    pending["blocks"] += 1
    pending["seqs"], pending["starts"], pending["values"] = [], [], []
    return [point]


def _block_point(key: str, pending: Pending) -> Point:
    median = float(statistics.median(pending["values"]))
    return Point(key, pending["blocks"], pending["seqs"][0], pending["starts"][0], median)


def series_points(summary: G4Summary, points: list[Point], key: str) -> list[Point]:
    """A block series' points in order, the block still filling last (as a point of its own)."""
    done = sorted((point for point in points if point.series == key), key=lambda p: p.position)
    pending = summary["pending"][key]
    if len(done) != pending["blocks"]:
        counted = pending["blocks"]
        raise EvidenceError(key, f"{len(done)} stored blocks, the summary counts {counted}")
    if pending["values"]:
        done.append(_block_point(key, pending))
    return done


def memory_points(summary: G4Summary, points: list[Point]) -> list[Point]:
    kept = sorted((point for point in points if point.series == MEMORY), key=lambda p: p.position)
    if len(kept) != summary["memory_kept"]:
        counted = summary["memory_kept"]
        raise EvidenceError(MEMORY, f"{len(kept)} kept memory samples, summary counts {counted}")
    return kept


def observed_seconds(summary: G4Summary, start: float, stop: float) -> float:
    """Observed time inside [start, stop]: the settled pieces whole (NeedsEveryWindow when the
    span would clip them), the tail's pieces clipped."""
    coverage = summary["coverage"]
    settled_low, settled_high = coverage["settled_low"], coverage["settled_high"]
    if settled_low is not None and (start > settled_low or (settled_high or 0) > stop):
        raise NeedsEveryWindow(f"the span [{start}, {stop}] clips settled observed time")
    covered = coverage["settled"]
    for low, high in coverage["tail"]:
        covered += max(min(high, stop) - max(low, start), 0.0)
    return covered
