"""The engagement timeline figure: a planned and an actual bar per gate, from plain dates."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from gates.charts.timeline import GateSpan, timeline_figure

NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)


def span(kind, planned=None, started=None, ended=None, verdict="pending", open=False):
    start, end = planned or (None, None)
    return GateSpan(kind, start, end, started, ended, verdict, open)


def test_each_gate_has_a_planned_and_an_actual_bar_in_gate_order():
    figure = timeline_figure(
        [
            span(
                "G1",
                (date(2026, 3, 1), date(2026, 3, 2)),
                NOW - timedelta(days=8),
                NOW - timedelta(days=7),
                "pass",
            ),
            span("G2", (date(2026, 3, 3), date(2026, 3, 9)), NOW - timedelta(days=1), open=True),
            span("G3", (date(2026, 3, 10), date(2026, 3, 20))),
        ],
        NOW,
    )
    planned, actual = figure["data"]
    assert planned["y"] == actual["y"] == ["G1", "G2", "G3"]
    # Planned G1: two whole days, from midnight of the first.
    assert planned["base"][0] == datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000
    assert planned["x"][0] == 2 * 86_400_000
    # Actual: G1 took a day; G2 is open, so its bar reaches now; G3 never started.
    assert actual["x"][0] == 86_400_000
    assert actual["base"][1] + actual["x"][1] == NOW.timestamp() * 1000
    assert actual["x"][2] is None
    assert actual["marker"]["color"][0] == "#1a7f37"  # the pass colour of the badges


def test_an_engagement_without_plans_or_runs_still_draws_an_axis():
    figure = timeline_figure([span("G1"), span("G2")], NOW)
    assert figure["data"][0]["x"] == [None, None]
    assert figure["layout"]["xaxis"]["type"] == "date"
