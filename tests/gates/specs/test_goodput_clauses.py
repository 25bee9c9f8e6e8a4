"""Goodput clauses in a G3 spec: a floor on one arm's share of requests within an SLO, or
goodput compared between arms; refused values name the field; spec diffs say them in words."""

from __future__ import annotations

import copy

import pytest

from gates.decisions.clauses import parse_clauses
from gates.specs.validation import default_spec, validate_spec
from gates.specs.words import spec_change_words

FLOOR = {
    "metric": "goodput",
    "slo": {"ttft_ms": 2000, "tpot_ms": 50},
    "arm": "offload",
    "at_least_pct": 90,
    "tiers": "all",
}
BETWEEN = {
    "metric": "goodput",
    "slo": {"tpot_ms": 50},
    "compare": "offload/baseline",
    "change": "ratio",
    "at_least": 0.95,
    "tiers": [8],
}


def with_clauses(*clauses: dict) -> dict:
    spec = copy.deepcopy(default_spec("G3"))
    spec["clauses"] = [copy.deepcopy(clause) for clause in clauses]
    return spec


def errors(*clauses: dict) -> list[str]:
    return [str(error) for error in validate_spec("G3", with_clauses(*clauses))]


def test_a_goodput_floor_and_goodput_between_arms_are_accepted_and_parsed():
    assert errors(FLOOR, BETWEEN) == []
    floor, between = parse_clauses(with_clauses(FLOOR, BETWEEN))
    assert (floor.floor, floor.compare, floor.threshold, floor.bound_ratio) == (
        True,
        "offload",
        90.0,
        0.9,
    )
    assert floor.slo is not None and floor.slo.text == "TTFT ≤ 2 s and TPOT ≤ 50 ms"
    assert (between.floor, between.compare, between.better) == (False, "offload/baseline", "higher")
    assert between.slo is not None and between.slo.text == "TPOT ≤ 50 ms"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"slo": {}}, "clauses[0].slo: {} should be non-empty"),
        ({"slo": {"ttft_ms": 0}}, "clauses[0].slo.ttft_ms: 0 is less than or equal to the minimum"),
        ({"slo": {"ttft_ms": 5, "e2el_ms": 9}}, "clauses[0].slo.e2el_ms: is not a known field"),
        ({"slo": None}, "clauses[0].slo: is required for metric 'goodput'"),
        ({"arm": "auditor"}, "clauses[0].arm: 'auditor' is not one of"),
        ({"at_least_pct": 101}, "clauses[0].at_least_pct: a share cannot exceed 100 %"),
        ({"at_least_pct": None}, "clauses[0].at_least_pct: is required for a goodput floor"),
        ({"compare": "offload/baseline"}, "clauses[0].compare: does not apply to a goodput floor"),
        ({"claimed_pct": 95}, "clauses[0].claimed_pct: does not apply to a goodput floor"),
        ({"metric": "ttft_p50"}, "clauses[0].slo: applies only to metric 'goodput'"),
        ({"metric": "ttft_p50", "slo": None}, "clauses[0].arm: only a goodput floor names one arm"),
        ({"metric": "goodputs"}, "clauses[0].metric: unknown metric 'goodputs'"),
    ],
)
def test_a_bad_goodput_clause_is_refused_naming_the_field(edit, expected):
    clause = {**FLOOR, **edit}
    clause = {key: value for key, value in clause.items() if value is not None}
    found = errors(clause)
    assert any(error.startswith(expected) for error in found), found


def test_a_floor_on_an_arm_the_spec_does_not_have_is_refused():
    spec = with_clauses({**FLOOR, "arm": "recompute"})
    del spec["arms"]["recompute"]
    spec["clauses"] += []
    found = [str(error) for error in validate_spec("G3", spec)]
    assert (
        "clauses[0].arm: unknown arm 'recompute'; the spec's arms are ['baseline', 'offload']"
        in found
    )


def test_goodput_between_arms_needs_compare_and_change_and_keeps_the_ratio_rules():
    assert "clauses[0].change: is required" in errors(
        {k: v for k, v in BETWEEN.items() if k != "change"}
    )
    assert any(
        "at_least_pct: does not apply to change 'ratio'" in e
        for e in errors({**BETWEEN, "at_least_pct": 5})
    )


def test_goodput_is_no_noise_metric_for_g2():
    spec = copy.deepcopy(default_spec("G2"))
    spec["noise_floor"]["metric"] = "goodput"
    assert any(
        str(e).startswith("noise_floor.metric: unknown metric") for e in validate_spec("G2", spec)
    )


def test_a_changed_goodput_clause_reads_in_words():
    before = with_clauses(FLOOR, BETWEEN)
    after = copy.deepcopy(before)
    after["clauses"][0]["slo"]["tpot_ms"] = 40
    after["clauses"][0]["at_least_pct"] = 95
    after["clauses"][1]["slo"] = {"tpot_ms": 50, "ttft_ms": 1500}
    lines = [str(words) for words in spec_change_words(before, after)]
    assert lines == [
        "goodput (TTFT ≤ 2 s and TPOT ≤ 50 ms) of offload at every tier, at least: 90 % → 95 %",
        "goodput (TTFT ≤ 2 s and TPOT ≤ 50 ms) of offload at every tier, SLO TPOT bound: "
        "50 ms → 40 ms",
        # A field added to a clause: the clause is named as the version that has the field.
        "goodput (TTFT ≤ 1.5 s and TPOT ≤ 50 ms) ratio at c=8, SLO TTFT bound: added, 1.5 s",
    ]


def test_a_goodput_clause_added_reads_as_its_sentence():
    before = with_clauses(BETWEEN)
    after = with_clauses(BETWEEN, FLOOR)
    lines = [str(words) for words in spec_change_words(before, after)]
    assert len(lines) == 1
    assert (
        "goodput (TTFT ≤ 2 s and TPOT ≤ 50 ms) of offload at every tier, at least 90 %" in lines[0]
    )
