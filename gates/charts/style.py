"""The look shared by every gate figure: verdict colours and shapes, arm colours, metric names
as a customer reads them, number and text formatting, and the strict-JSON figure finish.
Pure: plain values in, plain values out; no Django, no I/O.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from gates import figures
from gates.decisions.units import metric_unit
from gates.specs.schema import METRICS
from gates.specs.words import metric_name

# Same colours as the page's verdict badges (gates.css); shapes too, for colour-blind readers.
VERDICT_STYLES: dict[str, tuple[str, str]] = {
    "pass": ("#1a7f37", "circle"),
    "fail": ("#c62828", "x"),
    "inconclusive": ("#b26a00", "diamond"),
    "invalid": ("#667085", "square"),
}
OTHER_STYLE = ("#5b3cc4", "circle-open")
BAR_COLOR = "#1d2330"
PASS_SHADE = {"fillcolor": "#1a7f37", "opacity": 0.08, "line_width": 0, "layer": "below"}
FLOOR_SHADE = {"fillcolor": "#1a7f37", "opacity": 0.08, "layer": "below", "line_dash": "dash"}
# Arms avoid green and red, which mean pass and fail on these pages.
ARM_COLORS = ("#1f5fbf", "#e8710a", "#7b3fb5", "#128277", "#b5179e", "#5f6b7a")
FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13}
FRAME_PX = 130  # pixels around the plot area: title, legend, axes


def metric_label(name: Any) -> str:
    """'TTFT p50', 'output throughput': a metric name as a customer reads it, markup escaped."""
    return metric_name(text_of(name))


def metric_axis_title(name: str) -> str:
    unit = metric_unit(name) if name in METRICS else ""
    return f"{metric_label(name)}, {unit}" if unit else metric_label(name)


def finish_figure(figure: go.Figure, height: int) -> dict[str, Any]:
    figure.update_layout(
        template="none",
        height=height,
        font=FONT,
        margin={"l": 60, "r": 30, "t": 80, "b": 50},
        # Above every panel title, whatever the figure's height.
        legend={"orientation": "h", "x": 0, "y": 1, "yref": "container", "yanchor": "top"},
        hoverlabel={"align": "left"},
    )
    figure.update_xaxes(automargin=True)
    figure.update_yaxes(automargin=True)
    return _strict(figure.to_plotly_json())


def _strict(value: Any) -> Any:
    """The figure as strict JSON: arithmetic on extreme inputs (1e308 - -1e308) can still
    overflow to infinity, which JSON.parse in the browser refuses; such a value becomes a gap."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def empty_figure(message: str) -> dict[str, Any]:
    figure = go.Figure()
    figure.add_annotation(text=message, showarrow=False, font={"size": 15})
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False)
    return finish_figure(figure, 200)


def span_of(rows: list[list[float | None]]) -> tuple[float, float]:
    values = [value for row in rows for value in row if value is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    pad = (high - low) * 0.12 or max(abs(high) * 0.1, 1.0)
    if not math.isfinite(low - pad) or not math.isfinite(high + pad):
        return low, high
    return low - pad, high + pad


def verdict_style(verdict: str) -> tuple[str, str]:
    return VERDICT_STYLES.get(verdict, OTHER_STYLE)


def gap_between(start: float | None, end: float | None) -> float:
    return max(end - start, 0.0) if start is not None and end is not None else 0.0


def show_number(value: float | None, unit: str) -> str:
    """A chart label's number, as gates.figures writes it on the pages and in the PDF."""
    return "n/a" if value is None else figures.number(value, unit)


def integer_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text_of(value: Any) -> str:
    # Plotly renders a small HTML subset in text: spec-supplied names must not add markup.
    return html.escape(str(value), quote=False) if value is not None else ""


def wrap_text(text: str) -> str:
    return "<br>".join(textwrap.wrap(text, 80, break_long_words=False))


def field_of(container: Any, name: str) -> Any:
    return container.get(name) if isinstance(container, Mapping) else None


def mapping_or_empty(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def dicts_of(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]
