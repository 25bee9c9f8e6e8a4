"""What the history and compare pages show, worded: a figure panel per cell with its numbers in a
table, and each compared cell's row. Numbers are written by gates.figures; no HTTP, no queries.
"""

from __future__ import annotations

from gates import figures
from gates.charts.history import history_figure
from gates.decisions.statistics.change import Change
from gates.history.comparison import ArmChange, CellChange, Comparison, Side
from gates.history.series import CellHistory, HistoryPoint
from gates.pages.dashboards import NumbersTable, Panel
from gates.pages.formatting import moment
from gates.specs.words import metric_name

HISTORY_CAPTION = (
    "Each marker is one decided attempt's estimate with its confidence interval, at the time it "
    "was decided; its shape and colour give the verdict (circle pass, cross fail, diamond "
    "inconclusive, square invalid). The dashed step line is the bar, each spec version's for "
    "the period it was in force. Exact numbers are in the table below."
)
HISTORY_HEADERS = ["Decided", "Run", "Spec", "Estimate", "Interval", "Bar", "Verdict"]


def history_panels(cells: list[CellHistory], *, with_engagement: bool) -> list[Panel]:
    return [
        Panel(
            key=f"figure-history-{index}",
            title=f"{cell.engagement}: {cell.title}" if with_engagement else cell.title,
            caption=HISTORY_CAPTION,
            figure=history_figure(cell),
            table=NumbersTable(HISTORY_HEADERS, [_history_row(p, cell.unit) for p in cell.points]),
        )
        for index, cell in enumerate(cells)
    ]


def _history_row(point: HistoryPoint, unit: str) -> list[str]:
    estimate, low, high = figures.estimate_interval(point.estimate, point.low, point.high, unit)
    run = f"Run #{point.run_attempt}" if point.run_attempt is not None else figures.DASH
    spec = f"v{point.spec_version}" + (" (rehearsal)" if point.rehearsal else "")
    interval = f"{low} to {high}" if point.low is not None else figures.DASH
    bar = figures.number(point.threshold, unit)
    return [moment(point.decided_at), run, spec, estimate, interval, bar, point.verdict]


def compare_rows(comparison: Comparison) -> list[dict]:
    return [_compare_row(row) for row in comparison.rows]


def compare_arm_rows(comparison: Comparison) -> list[dict]:
    """Each arm's own metric per tier in both runs, and its change with its interval."""
    return [_arm_row(arm) for arm in comparison.arm_rows()]


def _arm_row(arm: ArmChange) -> dict:
    return {
        "title": f"{metric_name(arm.metric)}, c={arm.tier}",
        "arm": arm.arm,
        "before": figures.number(arm.before, arm.unit),
        "after": figures.number(arm.after, arm.unit),
        "change": change_words(arm.change),
        "reading": arm.reading,
        "tone": {"better": "pass", "worse": "fail"}.get(arm.reading, "inconclusive"),
    }


def _compare_row(row: CellChange) -> dict:
    return {
        "title": row.title,
        "before": _side(row.before, row.unit),
        "after": _side(row.after, row.unit),
        "change": change_words(row.change),
        "reading": row.reading,
        "tone": {"better": "pass", "worse": "fail"}.get(row.reading, "inconclusive"),
    }


def _side(side: Side, unit: str) -> dict:
    estimate, low, high = figures.estimate_interval(side.estimate, side.low, side.high, unit)
    return {
        "estimate": estimate,
        "interval": f"{low} to {high}" if side.low is not None else "",
        "verdict": side.verdict,
        "repetitions": figures.count(side.repetitions, "repetition"),
    }


def change_words(change: Change | None) -> dict:
    """The change in the measured ratio as a signed percentage with its interval."""
    if change is None:
        return {"estimate": figures.DASH, "interval": "", "confidence": ""}
    estimate, low, high = figures.estimate_interval(
        (change.ratio - 1) * 100, (change.ratio_low - 1) * 100, (change.ratio_high - 1) * 100, "%"
    )
    return {
        "estimate": _signed(estimate),
        "interval": f"{_signed(low)} to {_signed(high)}",
        "confidence": figures.share(change.confidence),
    }


def _signed(text: str) -> str:
    return text if text.startswith(("-", figures.DASH)) else f"+{text}"
