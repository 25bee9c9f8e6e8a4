"""Per-request figures of a bench cell, arms overlaid per concurrency tier: TTFT by send time (a
step or a warm-up shows), each arm's TTFT distribution (ECDF), and a replay's arrival-time error
against its fidelity bar. Each trace is cut to a bounded number of points that keeps the
extremes, and the figure says so. Pure: measurement rows in, figure dicts out; no Django, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from gates import figures
from gates.charts.g3 import ARM_ORDER
from gates.charts.style import ARM_COLORS, BAR_COLOR, finish_figure, integer_or_none, text_of

# Points drawn per arm and figure: enough to see every step, small enough for a phone's page.
MAX_POINTS = 2000
# An ECDF is a smooth curve: 500 evenly spaced ranks draw it as finely as a screen shows.
MAX_ECDF_POINTS = 500
HEIGHT_PX = 360
NOTE_GAP_PX = 64  # the x axis's ticks and title, above the notes


@dataclass
class ArmRequests:
    """One arm's measured requests at one tier, every repetition pooled, in send order per
    repetition; a request without a TTFT (it failed) has None there."""

    arm: str
    repetition: list[int] = field(default_factory=list)
    sent_s: list[float | None] = field(default_factory=list)
    send_at_s: list[float | None] = field(default_factory=list)
    ttft_ms: list[float | None] = field(default_factory=list)

    @property
    def has_ttft(self) -> bool:
        return any(value is not None for value in self.ttft_ms)

    @property
    def has_send_times(self) -> bool:
        return bool(self.sent_s) and all(value is not None for value in self.sent_s)

    @property
    def has_arrival(self) -> bool:
        pairs = zip(self.send_at_s, self.sent_s, strict=True)
        return any(at is not None and sent is not None for at, sent in pairs)


@dataclass(frozen=True)
class TierRequests:
    """Every arm measured at one tier; `arms` in the pages' arm order."""

    tier: int
    arms: list[ArmRequests]


def requests_by_tier(rows: Sequence[Mapping[str, Any]]) -> list[TierRequests]:
    """Measurement rows (arm, tier, repetition, metrics) grouped per tier and arm. An arm whose
    measurements keep no per-request arrays is kept, empty, so the figures can name it."""
    tiers: dict[int, dict[str, ArmRequests]] = {}
    for row in sorted(rows, key=lambda row: integer_or_none(row.get("repetition")) or 0):
        tier = integer_or_none(row.get("tier"))
        if tier is None:
            continue
        arm = text_of(row.get("arm")) or "?"
        pooled = tiers.setdefault(tier, {}).setdefault(arm, ArmRequests(arm))
        _pool(pooled, row)
    return [
        TierRequests(tier, sorted(arms.values(), key=lambda arm: _arm_rank(arm.arm)))
        for tier, arms in sorted(tiers.items())
    ]


def _pool(pooled: ArmRequests, row: Mapping[str, Any]) -> None:
    metrics = row.get("metrics")
    requests = metrics.get("per_request") if isinstance(metrics, Mapping) else None
    if not isinstance(requests, Mapping):
        return
    ttft = _numbers(requests.get("ttft_ms"))
    if not ttft:
        return
    count = len(ttft)
    pooled.ttft_ms += ttft
    pooled.sent_s += _aligned(requests.get("sent_s"), count)
    pooled.send_at_s += _aligned(requests.get("send_at_s"), count)
    pooled.repetition += [integer_or_none(row.get("repetition")) or 0] * count


def _numbers(values: Any) -> list[float | None]:
    """Finite numbers, anything else a gap. One comprehension, not a call per entry: a replay
    keeps tens of thousands of requests per cell (bools are not numbers)."""
    if not isinstance(values, list):
        return []
    return [float(v) if type(v) in (float, int) and math.isfinite(v) else None for v in values]


def _aligned(values: Any, count: int) -> list[float | None]:
    """An array that belongs beside the TTFTs, or gaps when it is missing or of another length."""
    found = _numbers(values)
    return found if len(found) == count else [None] * count


# --- decimation -------------------------------------------------------------------------------


def decimate_extremes(x: Sequence[float], y: Sequence[float], limit: int = MAX_POINTS) -> list[int]:
    """Indices of at most `limit` points: the series is cut into limit / 2 stretches along x and
    each keeps its lowest and highest y, so every spike, the overall minimum and maximum, and
    the shape of a step survive. All indices when the series is already small enough."""
    if len(x) <= limit:
        return list(range(len(x)))
    order = np.argsort(np.asarray(x, dtype=float), kind="stable")
    values = np.asarray(y, dtype=float)
    kept: set[int] = set()
    for stretch in np.array_split(order, max(limit // 2, 1)):
        if len(stretch):
            kept.add(int(stretch[np.argmin(values[stretch])]))
            kept.add(int(stretch[np.argmax(values[stretch])]))
    return sorted(kept, key=lambda index: (x[index], index))


def ecdf_points(
    values: Sequence[float], limit: int = MAX_POINTS
) -> tuple[list[float], list[float]]:
    """The empirical CDF (value, share at or under it in %) at evenly spaced ranks, at most
    `limit` of them; the smallest and the largest value are always among them."""
    ordered = np.sort(np.asarray(values, dtype=float))
    count = len(ordered)
    if count == 0:
        return [], []
    ranks = np.unique(np.linspace(0, count - 1, min(count, limit)).round().astype(int))
    return ordered[ranks].tolist(), ((ranks + 1) * 100.0 / count).tolist()


# --- figures ----------------------------------------------------------------------------------


def ttft_by_send_time_figure(tier: TierRequests, limit: int = MAX_POINTS) -> dict[str, Any]:
    """TTFT of every request against when it was sent (or its number in send order, when the
    bench kept no send times), one trace per arm, repetitions pooled."""
    drawn = [arm for arm in tier.arms if arm.has_ttft]
    by_time = bool(drawn) and all(arm.has_send_times for arm in drawn)
    figure, notes, series = go.Figure(), [], []
    for arm in drawn:
        points = [
            (x, ttft, repetition)
            for x, ttft, repetition in zip(
                _request_x(arm, by_time), arm.ttft_ms, arm.repetition, strict=True
            )
            if ttft is not None and x is not None
        ]
        kept = decimate_extremes([p[0] for p in points], [p[1] for p in points], limit)
        notes += _decimated_note(arm.arm, len(kept), len(points))
        x_unit = "s" if by_time else ""
        figure.add_trace(_markers(arm.arm))
        series.append(
            (
                [points[i][0] for i in kept],
                [points[i][1] for i in kept],
                [_request_hover(arm.arm, points[i], x_unit) for i in kept],
            )
        )
    x_title = "sent, s from the bench's start" if by_time else "request, in send order"
    figure.update_xaxes(title=x_title, rangemode="tozero")
    figure.update_yaxes(title="TTFT, ms", rangemode="tozero")
    return _finish(figure, notes + _missing_note(tier, drawn, "per-request TTFTs"), series)


def ttft_ecdf_figure(tier: TierRequests, limit: int = MAX_ECDF_POINTS) -> dict[str, Any]:
    """Each arm's TTFT distribution as an ECDF: the share of requests at or under each TTFT."""
    drawn = [arm for arm in tier.arms if arm.has_ttft]
    figure, notes, series = go.Figure(), [], []
    for arm in drawn:
        values = [value for value in arm.ttft_ms if value is not None]
        x, y = ecdf_points(values, limit)
        notes += _decimated_note(arm.arm, len(x), len(values), RANKS)
        line = {"shape": "hv", "color": _arm_color(arm.arm), "width": 2}
        figure.add_trace(go.Scatter(mode="lines", line=line, name=arm.arm, hoverinfo="text"))
        hover = [
            f"{arm.arm}: {figures.number(share, '%')} of requests at or under "
            f"{figures.number(value, 'ms')}"
            for value, share in zip(x, y, strict=True)
        ]
        series.append((x, y, hover))
    figure.update_xaxes(title="TTFT, ms", rangemode="tozero")
    figure.update_yaxes(title="% of requests at or under", range=[0, 100])
    return _finish(figure, notes + _missing_note(tier, drawn, "per-request TTFTs"), series)


def arrival_error_figure(
    tier: TierRequests, bar_ms: float | None, limit: int = MAX_POINTS
) -> dict[str, Any]:
    """How late (above 0) or early each request left against the replay's schedule, by its
    scheduled time, with the fidelity bar (the p99 of the error's size must stay under it)."""
    drawn = [arm for arm in tier.arms if arm.has_arrival]
    figure, notes, series = go.Figure(), [], []
    for arm in drawn:
        points = [
            (at, (sent - at) * 1000.0, repetition)
            for at, sent, repetition in zip(arm.send_at_s, arm.sent_s, arm.repetition, strict=True)
            if at is not None and sent is not None
        ]
        kept = decimate_extremes([p[0] for p in points], [p[1] for p in points], limit)
        notes += _decimated_note(arm.arm, len(kept), len(points))
        figure.add_trace(_markers(arm.arm))
        series.append(
            (
                [points[i][0] for i in kept],
                [points[i][1] for i in kept],
                [_arrival_hover(arm.arm, points[i]) for i in kept],
            )
        )
    if bar_ms is not None:
        for side in (1, -1):
            figure.add_hline(y=side * bar_ms, line_dash="dash", line_color=BAR_COLOR)
        notes.append(f"dashed: the fidelity bar, p99 of |error| under {bar_ms:g} ms")
    figure.update_xaxes(title="scheduled send, s from the replay's start", rangemode="tozero")
    figure.update_yaxes(title="sent minus scheduled, ms", zeroline=True)
    return _finish(figure, notes + _missing_note(tier, drawn, "scheduled send times"), series)


def _request_x(arm: ArmRequests, by_time: bool) -> list[float | None]:
    """When each request was sent, or its number in its repetition's send order."""
    if by_time:
        return list(arm.sent_s)
    numbers: list[float | None] = []
    counted = dict.fromkeys(arm.repetition, 0)
    for repetition in arm.repetition:
        counted[repetition] += 1
        numbers.append(float(counted[repetition]))
    return numbers


def _request_hover(arm: str, point: tuple[float, float, int], x_unit: str) -> str:
    x, ttft, repetition = point
    where = f"sent {figures.number(x, 's')}" if x_unit else f"request {x:g}"
    return f"{arm} r{repetition}: {where}, TTFT {figures.number(ttft, 'ms')}"


def _arrival_hover(arm: str, point: tuple[float, float, int]) -> str:
    at, error, repetition = point
    late = "late" if error >= 0 else "early"
    return (
        f"{arm} r{repetition}: due {figures.number(at, 's')}, {figures.number(error, 'ms')} {late}"
    )


# Short: a note is one line of the figure, which a 390 px phone screen cuts off past ~55 chars.
STRETCHES = "extremes kept"
RANKS = "even ranks, min and max kept"


def _decimated_note(arm: str, drawn: int, total: int, how: str = STRETCHES) -> list[str]:
    if drawn >= total:
        return []
    return [f"{arm}: {figures.number(drawn)} of {figures.number(total)} requests drawn ({how})"]


def _missing_note(tier: TierRequests, drawn: list[ArmRequests], what: str) -> list[str]:
    missing = [arm.arm for arm in tier.arms if arm not in drawn]
    if not missing:
        return []
    return [f"no {what} kept for {', '.join(missing)}"]


def _markers(arm: str) -> go.Scatter:
    marker = {"color": _arm_color(arm), "size": 4, "opacity": 0.7}
    return go.Scatter(mode="markers", marker=marker, name=arm, hoverinfo="text")


Series = tuple[list[float], list[float], list[str]]


def _finish(figure: go.Figure, notes: list[str], series: list[Series]) -> dict[str, Any]:
    """The notes under the plot, in words, so a thinned or missing arm is never silent; then
    each trace's points, set on the finished dict: Plotly's checks of every element of every
    array took seconds for a large run, and these are plain numbers and text already."""
    if notes:
        figure.add_annotation(
            text="<br>".join(notes),
            xref="paper",
            yref="paper",
            x=0,
            y=-NOTE_GAP_PX / (HEIGHT_PX - 160),  # below the x axis title, in plot heights
            xanchor="left",
            yanchor="top",
            align="left",
            showarrow=False,
            font={"size": 11},
        )
    finished = finish_figure(figure, HEIGHT_PX + 16 * len(notes))
    finished["layout"]["margin"]["b"] = 80 + 16 * len(notes)
    for trace, (x, y, hover) in zip(finished["data"], series, strict=True):
        trace.update(x=_rounded(x, 4), y=_rounded(y, 3), hovertext=hover)
    return finished


def _rounded(values: list[float], places: int) -> list[float | None]:
    """Short JSON (a tenth of a ms is finer than any clock here); overflow is a gap."""
    return [round(v, places) if math.isfinite(v) else None for v in values]


def _arm_color(arm: str) -> str:
    return ARM_COLORS[_arm_rank(arm)[0] % len(ARM_COLORS)]


def _arm_rank(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)
