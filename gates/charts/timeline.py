"""The engagement's G1-G4 timeline: each gate's planned window beside what actually happened
(first run started to decision, or to now while it runs), coloured by verdict.
Pure: plain dates in, a Plotly figure (a dict) out; no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

import plotly.graph_objects as go

from gates.charts.style import finish_figure, verdict_style

PLANNED_COLOR = "#c9d3e3"
OPEN_COLOR = "#1f5fbf"  # a window still open: running, or undecided
MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class GateSpan:
    """One gate's row: the plan (dates) and what happened (times); any may be missing."""

    kind: str
    planned_start: date | None
    planned_end: date | None
    actual_start: datetime | None
    actual_end: datetime | None
    verdict: str
    open: bool  # still running or awaiting a verdict: the actual bar ends at `now`


def timeline_figure(spans: Sequence[GateSpan], now: datetime) -> dict:
    """Two bars per gate (planned above actual), newest gate at the bottom, a line at now."""
    figure = go.Figure()
    kinds = [span.kind for span in spans]
    planned = [_planned(span) for span in spans]
    actual = [_actual(span, now) for span in spans]
    figure.add_trace(_bars("planned", kinds, planned, [PLANNED_COLOR] * len(spans)))
    colours = [OPEN_COLOR if s.open else verdict_style(s.verdict)[0] for s in spans]
    figure.add_trace(_bars("actual", kinds, actual, colours))
    figure.add_vline(x=now.timestamp() * 1000, line_dash="dot", line_color="#667085")
    figure.update_layout(barmode="group", bargap=0.35)  # the page's heading is its title
    figure.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=kinds)
    figure.update_xaxes(type="date", nticks=6)
    finished = finish_figure(figure, 110 + 42 * max(len(spans), 1))
    finished["layout"]["margin"]["t"] = 40  # room for the legend alone
    return finished


def _bars(name: str, kinds: list[str], windows: list, colours: list[str]) -> go.Bar:
    starts = [window[0] if window else None for window in windows]
    lengths = [window[1] - window[0] if window else None for window in windows]
    return go.Bar(
        name=name,
        orientation="h",
        y=kinds,
        x=lengths,
        base=starts,
        marker={"color": colours},
        hovertemplate=f"%{{y}} {name}<extra></extra>",
    )


def _planned(span: GateSpan) -> tuple[float, float] | None:
    if span.planned_start is None:
        return None
    end = span.planned_end or span.planned_start
    start_ms = _ms(datetime.combine(span.planned_start, time.min, UTC))
    # A planned window runs to the end of its last day.
    end_ms = _ms(datetime.combine(end, time.min, UTC)) + MS_PER_DAY
    return start_ms, max(end_ms, start_ms)


def _actual(span: GateSpan, now: datetime) -> tuple[float, float] | None:
    if span.actual_start is None:
        return None
    end = now if span.open or span.actual_end is None else span.actual_end
    return _ms(span.actual_start), max(_ms(end), _ms(span.actual_start))


def _ms(moment: datetime) -> float:
    return moment.timestamp() * 1000
