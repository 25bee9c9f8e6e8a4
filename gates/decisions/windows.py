"""G4 evidence: the soak windows fed to the decision engine and the span they cover, parsed and
checked (EvidenceError for shapes the soak agent never emits). Pure: imports no Django.
"""

from __future__ import annotations

from typing import Any, TypedDict

from gates.decisions.validity import EvidenceError, read_count, read_number


class Window(TypedDict):
    """One soak window as checked here; a value the window does not report is None."""

    seq: int
    start: float
    end: float
    crashed: bool
    completed: float | None
    failed: float | None
    memory_bytes: float | None
    output_throughput: float | None
    ttft_p99_ms: float | None
    external_hit_rate: float | None


def parse_windows(windows: Any) -> list[Window]:
    if not isinstance(windows, list):
        raise EvidenceError("windows", "must be a list")
    by_seq: dict[int, Window] = {}
    for i, raw in enumerate(windows):
        window = _parse_window(raw, f"windows[{i}]")
        earlier = by_seq.setdefault(window["seq"], window)
        if earlier != window:
            raise EvidenceError(
                f"windows[{i}].seq", f"seq {window['seq']} twice with different data"
            )
    return sorted(by_seq.values(), key=lambda window: window["seq"])


def _parse_window(raw: Any, field: str) -> Window:
    if not isinstance(raw, dict):
        raise EvidenceError(field, "must be an object")
    seq = raw.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise EvidenceError(f"{field}.seq", "must be a non-negative integer")
    start, end = read_number(raw, "start", field), read_number(raw, "end", field)
    if start is None or end is None or end <= start:
        raise EvidenceError(f"{field}.end", "start and end must be finite with end after start")
    if not isinstance(raw.get("crashed"), bool):
        raise EvidenceError(f"{field}.crashed", "must be true or false")
    return {
        "seq": seq,
        "start": start,
        "end": end,
        "crashed": raw["crashed"],
        "completed": read_count(raw, "completed", field),
        "failed": read_count(raw, "failed", field),
        "memory_bytes": read_count(raw, "memory_bytes", field),
        "output_throughput": read_count(raw, "output_throughput", field),
        "ttft_p99_ms": read_count(raw, "ttft_p99_ms", field),
        "external_hit_rate": read_number(raw, "external_hit_rate", field),
    }


def parse_span(context: Any, first: float | None, last: float | None) -> tuple[float, float]:
    """The soak's span: the context's start and end, else the windows' earliest start and
    latest end (`first`, `last`; None without windows)."""
    if context is not None and not isinstance(context, dict):
        raise EvidenceError("context", "must be an object or null")
    context = context or {}
    first = 0.0 if first is None else first
    last = 0.0 if last is None else last
    started = read_number(context, "started_at", "context")
    ended = read_number(context, "ended_at", "context")
    started = first if started is None else started
    ended = max(last, started) if ended is None else ended
    if ended < started:
        raise EvidenceError("context.ended_at", "must not be before started_at")
    return started, ended
