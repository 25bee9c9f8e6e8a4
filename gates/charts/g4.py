"""Plotly figures of a G4 soak: one panel per measured series over the soak's hours, with the
gaps nobody observed shaded, crashes and change points marked, and the numbers of each series
for the table under the chart. Long soaks are downsampled here (MinMaxLTTB from tsdownsample)
to a bounded number of points per series, so a 72 h soak at 10 s windows draws as fast as a
short one; a zoomed range is drawn again from its own samples, at full resolution once few
enough. Pure: arrays and plain values in, JSON-able figure dicts out; no Django, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

from gates.charts.style import ARM_COLORS, FONT, VERDICT_STYLES, empty_figure

# Points per series on the page: far more than a phone's width in pixels, and MinMaxLTTB keeps
# every spike's extremes, so a crash-time dip stays visible at any length of soak.
PAGE_POINTS = 1000
PANEL_PX = 170
GAP_SHADE = {"fillcolor": "#667085", "opacity": 0.18, "line": {"width": 0}, "layer": "below"}
CRASH_COLOR = VERDICT_STYLES["fail"][0]
CHANGE_COLOR = VERDICT_STYLES["inconclusive"][0]
SIGNIFICANT_DIGITS = 5
HOUR_DECIMALS = 5  # 0.018 s: finer than any window


@dataclass(frozen=True)
class Series:
    """One line: `key` names it in SoakData.values, `panel` the panel it is drawn in."""

    key: str
    label: str
    panel: str
    unit: str


SERIES = (
    Series("output_throughput", "output throughput", "Output throughput", "tokens/s"),
    Series("ttft_p50_ms", "TTFT p50", "Time to first token", "ms"),
    Series("ttft_p99_ms", "TTFT p99", "Time to first token", "ms"),
    Series("error_rate_pct", "error rate", "Failed requests", "%"),
    Series("kv_cache_usage_pct", "KV cache usage", "KV cache usage", "%"),
    Series("offload_hit_rate_pct", "offload hit rate", "Offload tier hit rate", "%"),
    Series("server_rss_gib", "server RSS", "Host memory", "GiB"),
    Series("host_available_gib", "host available", "Host memory", "GiB"),
    Series("gpu_memory_gib", "GPU memory used", "GPU memory", "GiB"),
)
PANELS = tuple(dict.fromkeys(series.panel for series in SERIES))
# The drift clauses' change points belong to the series they were found in.
CHANGE_POINT_SERIES = {"throughput_drift": "output_throughput", "ttft_p99_change": "ttft_p99_ms"}


@dataclass
class SoakData:
    """A soak's windows as columns: `hours` since the soak's start (window starts), and one
    float array per series key (NaN where a window has no value), in seq order."""

    hours: np.ndarray
    values: dict[str, np.ndarray]
    gaps: list[dict] = field(default_factory=list)  # start_h, end_h, cause
    crashes: list[float] = field(default_factory=list)  # hours of crashed windows
    change_points: dict[str, list[float]] = field(default_factory=dict)  # series key: hours
    total: int = 0  # windows in the whole soak (the data may be a zoomed range of it)


def kept_indices(hours: np.ndarray, values: np.ndarray, points: int | None) -> np.ndarray:
    """Indices of the samples to draw: every finite one when they fit in `points` (or points
    is None: full resolution), else MinMaxLTTB's choice, which keeps each bucket's extremes."""
    finite = np.flatnonzero(np.isfinite(values))
    if points is None or len(finite) <= points:
        return finite
    chosen = MinMaxLTTBDownsampler().downsample(hours[finite], values[finite], n_out=points)
    return finite[np.asarray(chosen, dtype=np.int64)]


def soak_figure(
    data: SoakData,
    *,
    points: int | None = PAGE_POINTS,
    x_range: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The soak's panels, stacked on one shared hours axis; `x_range` (hours) keeps a zoomed
    view where the reader put it. Built as plain dicts: plotly.py's validating objects cost
    more than the whole rest of the page for a few thousand points."""
    if len(data.hours) == 0:
        return empty_figure("No window of this soak has been stored yet.")
    traces, colors = [], dict.fromkeys(PANELS, 0)
    for series in SERIES:
        row = PANELS.index(series.panel) + 1
        color = ARM_COLORS[colors[series.panel] % len(ARM_COLORS)]
        colors[series.panel] += 1
        traces.append(_trace(data, series, color, points, row))
    shapes = _gap_shapes(data.gaps) + _crash_shapes(data.crashes)
    for key, hours in data.change_points.items():
        row = PANELS.index(next(s.panel for s in SERIES if s.key == key)) + 1
        shapes += [_change_shape(hour, row) for hour in hours]
    traces += _legend_entries(data)
    layout = {
        **_panel_axes(x_range),
        "annotations": [_panel_title(panel, row) for row, panel in enumerate(PANELS, 1)],
        "shapes": shapes,
        "height": PANEL_PX * len(PANELS) + 120,
        "font": FONT,
        "margin": {"l": 60, "r": 30, "t": 80, "b": 50},
        "legend": {"orientation": "h", "x": 0, "y": 1, "yref": "container", "yanchor": "top"},
        "hoverlabel": {"align": "left"},
        "hovermode": "x unified",
        "showlegend": True,
    }
    return {"data": traces, "layout": layout}


def _domains() -> list[tuple[float, float]]:
    """Each panel's vertical share of the plot area, top panel first."""
    spacing = 0.35 / len(PANELS)
    height = (1 - spacing * (len(PANELS) - 1)) / len(PANELS)
    tops = [1 - row * (height + spacing) for row in range(len(PANELS))]
    return [(max(top - height, 0.0), top) for top in tops]


def _panel_axes(x_range: tuple[float, float] | None) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for row, (low, high) in enumerate(_domains(), 1):
        suffix = "" if row == 1 else str(row)
        last = row == len(PANELS)
        x_axis: dict[str, Any] = {
            "anchor": f"y{suffix}",
            "automargin": True,
            "showticklabels": last,
            **({"matches": "x"} if row > 1 else {}),
            **({"title": {"text": "hours into the soak"}} if last else {}),
        }
        if x_range is not None:
            x_axis.update(range=list(x_range), autorange=False)
        axes[f"xaxis{suffix}"] = x_axis
        axes[f"yaxis{suffix}"] = {"anchor": f"x{suffix}", "domain": [low, high], "automargin": True}
    return axes


def _panel_title(panel: str, row: int) -> dict[str, Any]:
    units = {series.unit for series in SERIES if series.panel == panel}
    return {
        "text": f"{panel}, {', '.join(sorted(units))}",
        "x": 0,
        "xref": "paper",
        "xanchor": "left",
        "y": _domains()[row - 1][1],
        "yref": "paper",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": 14},
    }


def _trace(
    data: SoakData, series: Series, color: str, points: int | None, row: int
) -> dict[str, Any]:
    values = data.values.get(series.key, np.full(len(data.hours), np.nan))
    kept = kept_indices(data.hours, values, points)
    xs, ys = _with_breaks(
        np.round(data.hours[kept], HOUR_DECIMALS).tolist(), _rounded(values[kept]), data.gaps
    )
    suffix = "" if row == 1 else str(row)
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "xaxis": f"x{suffix}",
        "yaxis": f"y{suffix}",
        "mode": "lines",
        "name": series.label,
        "line": {"color": color, "width": 1.5},
        "connectgaps": False,
        "hovertemplate": f"%{{y:.4g}} {series.unit}<extra>{series.label}</extra>",
    }


def _with_breaks(
    xs: list[float], ys: Sequence[float | None], gaps: Sequence[Mapping[str, Any]]
) -> tuple[list[float], list[float | None]]:
    """Break the line inside each gap (a None point), so unobserved time is not drawn over."""
    starts = sorted(gap["start_h"] for gap in gaps)
    if not starts:
        return xs, list(ys)
    out_x: list[float] = []
    out_y: list[float | None] = []
    pending = 0
    for x, y in zip(xs, ys, strict=True):
        while pending < len(starts) and starts[pending] < x:
            out_x.append(starts[pending])
            out_y.append(None)
            pending += 1
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def _rounded(values: np.ndarray) -> list[float]:
    """Finite values to SIGNIFICANT_DIGITS of the largest one (one decimal count for the whole
    series, so the JSON carries short numbers); a per-value loop costs more than the query."""
    if len(values) == 0:
        return []
    largest = float(np.max(np.abs(values)))
    magnitude = math.floor(math.log10(largest)) if largest > 0 else 0
    return np.round(values, max(SIGNIFICANT_DIGITS - 1 - magnitude, 0)).tolist()


def _gap_shapes(gaps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": gap["start_h"],
            "x1": gap["end_h"],
            "y0": 0,
            "y1": 1,
            **GAP_SHADE,
        }
        for gap in gaps
    ]


def _crash_shapes(crashes: Sequence[float]) -> list[dict[str, Any]]:
    line = {"color": CRASH_COLOR, "width": 1.5, "dash": "dot"}
    return [_vertical(hour, "x", "paper", line) for hour in crashes]


def _change_shape(hour: float, row: int) -> dict[str, Any]:
    line = {"color": CHANGE_COLOR, "width": 1.5, "dash": "dash"}
    suffix = "" if row == 1 else str(row)
    return _vertical(hour, f"x{suffix}", f"y{suffix} domain", line)


def _vertical(hour: float, xref: str, yref: str, line: dict) -> dict[str, Any]:
    ends = {"x0": hour, "x1": hour, "y0": 0, "y1": 1}
    return {"type": "line", "xref": xref, "yref": yref, **ends, "line": line}


def _legend_entries(data: SoakData) -> list[dict[str, Any]]:
    """Legend entries that say what the bands and lines mean (they draw nothing)."""
    entries = [
        ("unobserved (gap)", GAP_SHADE["fillcolor"], "square", bool(data.gaps)),
        ("crash", CRASH_COLOR, "x", bool(data.crashes)),
        ("change point", CHANGE_COLOR, "line-ns-open", any(data.change_points.values())),
    ]
    return [
        {
            "type": "scatter",
            "x": [None],
            "y": [None],
            "mode": "markers",
            "name": name,
            "marker": {"color": color, "symbol": symbol},
        }
        for name, color, symbol, present in entries
        if present
    ]


def change_point_hours(result: Mapping[str, Any] | None, hour_of_seq) -> dict[str, list[float]]:
    """Series key -> hours of the change points the verdict's drift clauses found; each point
    is placed at its window (`hour_of_seq(seq)`, None when that window is not in view)."""
    found: dict[str, list[float]] = {}
    clauses = result.get("clauses") if isinstance(result, Mapping) else None
    for row in clauses if isinstance(clauses, list) else []:
        check = row.get("check") if isinstance(row, Mapping) else None
        key = CHANGE_POINT_SERIES.get(check) if isinstance(check, str) else None
        if key is None:
            continue
        for point in row.get("change_points") or []:
            hour = hour_of_seq(point.get("seq"))
            if hour is not None:
                found.setdefault(key, []).append(hour)
    return found


def summary_rows(data: SoakData) -> list[dict[str, Any]]:
    """Each series' numbers for the table under the chart: windows with a value, first,
    minimum, median, maximum and last, in the series' unit."""
    rows = []
    for series in SERIES:
        values = data.values.get(series.key, np.array([]))
        finite = values[np.isfinite(values)]
        numbers = (
            [finite[0], finite.min(), np.median(finite), finite.max(), finite[-1]]
            if len(finite)
            else [None] * 5
        )
        rows.append(
            {
                "series": series.label,
                "unit": series.unit,
                "windows": len(finite),
                **dict(
                    zip(
                        ("first", "min", "median", "max", "last"),
                        [None if n is None else _rounded(np.array([n]))[0] for n in numbers],
                        strict=True,
                    )
                ),
            }
        )
    return rows
