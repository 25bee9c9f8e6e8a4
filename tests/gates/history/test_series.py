"""A clause's history from decision records: one point per decided attempt with the engine's
numbers, the bar as steps over the periods each version was in force, and the figure that
draws them with the numbers gates.figures writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from gates import figures
from gates.charts.history import history_figure, plot_time
from gates.charts.style import VERDICT_STYLES
from gates.history.series import (
    DecisionRecord,
    VersionRecord,
    bar_steps,
    cell_histories,
    clause_choices,
    clause_slug,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=30)


def cell(tier: int, estimate, low, high, verdict: str, threshold: float = 25.0) -> dict:
    return {
        "clause": 0,
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "tier": tier,
        "threshold": threshold,
        "estimate": estimate,
        "low": low,
        "high": high,
        "verdict": verdict,
    }


def decision(pk: int, days: int, version: int, clauses: list[dict], **extra) -> DecisionRecord:
    values = {
        "decision_id": pk,
        "gate_id": 7,
        "gate_kind": "G3",
        "engagement_id": 1,
        "engagement": "480B long context",
        "decided_at": T0 + timedelta(days=days),
        "run_id": 100 + pk,
        "run_attempt": pk,
        "spec_version": version,
        "rehearsal": False,
        "clauses": clauses,
    }
    return DecisionRecord(**(values | extra))


def test_every_decided_attempt_is_one_point_per_cell_oldest_first():
    records = [
        decision(
            2,
            10,
            1,
            [cell(4, 30.25, 26.5, 34.0, "pass"), cell(8, 22.0, 18.0, 27.0, "inconclusive")],
        ),
        decision(
            1, 2, 1, [cell(4, 20.0, 15.0, 24.0, "fail"), cell(8, 21.0, None, None, "inconclusive")]
        ),
    ]
    cells = cell_histories(records, [VersionRecord(7, 1, T0)], NOW)
    assert [c.key for c in cells] == [
        "ttft_p50:offload/baseline:reduction@c=4",
        "ttft_p50:offload/baseline:reduction@c=8",
    ]
    first = cells[0]
    assert first.title == "TTFT p50 reduction, offload vs baseline, c=4" and first.unit == "%"
    assert [(p.run_attempt, p.estimate, p.low, p.high, p.verdict) for p in first.points] == [
        (1, 20.0, 15.0, 24.0, "fail"),
        (2, 30.25, 26.5, 34.0, "pass"),
    ]
    assert cells[1].points[0].low is None  # before the first look: no interval


def test_a_cell_without_a_number_draws_no_point_and_a_yes_no_check_no_cell():
    records = [
        decision(
            1, 1, 1, [cell(4, None, None, None, "invalid"), {"check": "health", "verdict": "pass"}]
        ),
    ]
    assert cell_histories(records, [], NOW) == []


def test_a_soak_check_with_an_observed_number_is_drawn_against_its_limit():
    row = {"check": "memory_growth_mib_per_h", "verdict": "pass", "observed": 12.25, "limit": 64.0}
    (found,) = cell_histories([decision(1, 1, 1, [row], gate_kind="G4")], [], NOW)
    assert found.clause == "memory_growth_mib_per_h" and found.tier is None
    assert (found.points[0].estimate, found.points[0].threshold) == (12.25, 64.0)


def test_each_version_bar_is_drawn_from_when_it_came_into_force_to_the_next():
    records = [
        decision(1, 2, 1, [cell(4, 20.0, 15.0, 24.0, "fail", threshold=29.0)]),
        decision(2, 12, 2, [cell(4, 27.0, 25.5, 28.5, "pass", threshold=25.0)]),
    ]
    versions = [VersionRecord(7, 1, T0), VersionRecord(7, 2, T0 + timedelta(days=8))]
    (found,) = cell_histories(records, versions, NOW)
    assert [(s.spec_version, s.threshold, s.start, s.end, s.in_force) for s in found.bar] == [
        (1, 29.0, T0, T0 + timedelta(days=8), True),
        (2, 25.0, T0 + timedelta(days=8), NOW, True),
    ]


def test_a_version_never_signed_by_both_draws_its_bar_from_its_first_decision():
    points = cell_histories(
        [decision(1, 3, 1, [cell(4, 20.0, 15.0, 24.0, "fail")], rehearsal=True)], [], NOW
    )[0].points
    (step,) = bar_steps(points, {}, NOW)
    assert (step.start, step.end, step.in_force) == (T0 + timedelta(days=3), NOW, False)


def test_the_same_clause_in_two_engagements_has_one_slug_and_two_cells():
    other = decision(5, 4, 1, [cell(4, 31.0, 28.0, 33.0, "pass")], gate_id=9, engagement_id=2)
    mine = decision(1, 2, 1, [cell(4, 20.0, 15.0, 24.0, "fail")])
    cells = cell_histories([mine, other], [], NOW)
    assert {c.clause for c in cells} == {clause_slug(cell(4, 0, 0, 0, "pass"))}
    assert [c.gate_id for c in cells] == [7, 9]


def test_the_figure_marks_verdicts_by_shape_and_colour_with_the_bar_as_a_step_line():
    records = [
        decision(1, 2, 1, [cell(4, 20.0, 15.0, 24.0, "fail", threshold=29.0)]),
        decision(2, 12, 2, [cell(4, 30.25, 26.5, 34.0, "pass")]),
    ]
    versions = [VersionRecord(7, 1, T0), VersionRecord(7, 2, T0 + timedelta(days=8))]
    (found,) = cell_histories(records, versions, NOW)
    figure = json.loads(json.dumps(history_figure(found)))
    markers = {t["name"]: t for t in figure["data"] if t["mode"] == "markers"}
    for verdict in ("pass", "fail"):
        color, symbol = VERDICT_STYLES[verdict]
        assert (markers[verdict]["marker"]["color"], markers[verdict]["marker"]["symbol"]) == (
            color,
            symbol,
        )
    passed = markers["pass"]
    assert passed["x"] == [plot_time(T0 + timedelta(days=12))] and passed["y"] == [30.25]
    assert passed["error_y"]["array"] == [34.0 - 30.25]
    assert passed["error_y"]["arrayminus"] == [30.25 - 26.5]
    estimate, low, high = figures.estimate_interval(30.25, 26.5, 34.0, "%")
    assert f"{estimate} (interval {low} to {high})" in passed["hovertext"][0]
    assert "Run #2" in passed["hovertext"][0] and "spec v2" in passed["hovertext"][0]
    (bar,) = [t for t in figure["data"] if t["name"] == "bar"]
    assert bar["line"]["shape"] == "hv" and bar["y"] == [29.0, 25.0, 25.0]
    assert bar["x"] == [plot_time(T0), plot_time(T0 + timedelta(days=8)), plot_time(NOW)]


def g2_checks(seconds, mismatch_pct, hit_rate, noise_pct) -> list[dict]:
    """A G2 decision's rows as gates.decisions.g2 writes them (numbers only, causes shortened)."""
    return [
        {"check": "health", "verdict": "pass", "cause": "", "timeout_s": 600.0, "seconds": seconds},
        {
            "check": "equivalence",
            "verdict": "pass",
            "cause": "",
            "prompts": 200,
            "compared": 200,
            "mismatched": [],
            "mismatch_pct": mismatch_pct,
            "max_mismatch_pct": 1.0,
        },
        {
            "check": "offload_hit",
            "verdict": "pass" if hit_rate is not None else "inconclusive",
            "cause": "",
            "min_external_hit_rate": 0.2,
            "external_hit_rate": hit_rate,
        },
        {
            "check": "noise_floor",
            "verdict": "pass",
            "cause": "",
            "metric": "ttft_p50",
            "noise_pct": noise_pct,
            "max_noise_pct": 5.0,
        },
    ]


def test_a_g2_checks_numbers_are_drawn_against_their_bars_across_attempts():
    records = [
        decision(1, 1, 1, g2_checks(41.0, 0.5, None, 3.1), gate_kind="G2"),
        decision(2, 3, 1, g2_checks(38.5, 0.0, 0.42, 2.4), gate_kind="G2"),
    ]
    found = {cell.clause: cell for cell in cell_histories(records, [], NOW)}
    assert list(found) == ["health", "equivalence", "noise_floor", "offload_hit"]
    health = found["health"]
    assert [(p.estimate, p.threshold) for p in health.points] == [(41.0, 600.0), (38.5, 600.0)]
    assert (health.unit, health.comparison) == ("s", "at_most")
    assert health.title == "seconds until the offload server was healthy"
    assert [p.estimate for p in found["equivalence"].points] == [0.5, 0.0]
    assert found["equivalence"].unit == "%"
    # The first attempt observed no hit rate: no point, not a zero.
    assert [(p.estimate, p.threshold) for p in found["offload_hit"].points] == [(0.42, 0.2)]
    assert found["noise_floor"].title == "A/A noise floor (TTFT p50)"
    assert [bar.threshold for bar in found["noise_floor"].bar] == [5.0]
    assert dict(clause_choices(list(found.values())))["noise_floor"] == "A/A noise floor (TTFT p50)"


def test_a_g2_like_row_of_another_gate_is_not_read_as_a_g2_check():
    row = {"check": "health", "verdict": "pass", "seconds": 3.0, "timeout_s": 60.0}
    assert cell_histories([decision(1, 1, 1, [row], gate_kind="G1")], [], NOW) == []
