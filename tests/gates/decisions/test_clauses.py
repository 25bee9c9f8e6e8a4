"""Clause parsing: every bad clause is a ClauseError naming its field, and nothing else escapes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.decisions import KNOWN_METRICS, ClauseError, parse_clauses
from gates.decisions.clauses import Clause, parse_g3_spec
from tests.gates.decisions.test_g3 import g3_spec

TEMPLATE = Path(__file__).resolve().parents[3] / "gates" / "spec_templates" / "G3.json"


def clause(**changes) -> dict:
    base = {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "at_least_pct": 25,
        "tiers": "all",
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not None}


def test_the_design_template_parses_into_clauses_with_bounds():
    spec = json.loads(TEMPLATE.read_text())
    clauses = parse_clauses(spec)
    assert [c.compare for c in clauses] == ["offload/baseline"] * 3 + ["recompute/offload"]
    assert clauses[0].tiers == (4, 8, 16) and clauses[0].bound_ratio == pytest.approx(0.75)
    assert clauses[1].tiers == (8,) and clauses[1].bound_ratio == pytest.approx(1.29)
    assert clauses[3].change == "ratio" and clauses[3].bound_ratio == 8.6


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        (clause(metric="ttft_p42"), "clauses[0].metric", "unknown metric"),
        (clause(compare="offload/ghost"), "clauses[0].compare", "unknown arm 'ghost'"),
        (clause(compare="offload"), "clauses[0].compare", "'A/B'"),
        (clause(compare="offload/offload"), "clauses[0].compare", "with itself"),
        (clause(change="halving"), "clauses[0].change", "must be one of"),
        (clause(at_least_pct=-25), "clauses[0].at_least_pct", "must be positive"),
        (clause(at_least_pct=0), "clauses[0].at_least_pct", "must be positive"),
        (clause(at_least_pct=100), "clauses[0].at_least_pct", "below 100"),
        (clause(at_least_pct=math.nan), "clauses[0].at_least_pct", "finite"),
        (clause(at_least_pct=True), "clauses[0].at_least_pct", "finite number"),
        (clause(at_least_pct=None), "clauses[0].at_least_pct", "is required"),
        (clause(change="ratio", at_least_pct=None, at_least=-2), "clauses[0].at_least", "positive"),
        (clause(change="ratio", at_least=2), "clauses[0].at_least_pct", "does not apply"),
        (clause(tiers=[32]), "clauses[0].tiers", "tier 32 is not one of"),
        (clause(tiers=[8, 8]), "clauses[0].tiers", "twice"),
        (clause(tiers=[]), "clauses[0].tiers", "non-empty"),
        (clause(tiers="some"), "clauses[0].tiers", "'all'"),
        (clause(tier=8), "clauses[0].tier", "not a known clause field"),
    ],
)
def test_a_bad_clause_is_refused_with_its_field(bad, field, words):
    with pytest.raises(ClauseError) as caught:
        parse_clauses(g3_spec([bad]))
    assert caught.value.field == field
    assert words in caught.value.message


def test_the_field_names_the_index_of_the_bad_clause():
    with pytest.raises(ClauseError) as caught:
        parse_clauses(g3_spec([clause(), clause(), clause(metric="vram")]))
    assert caught.value.field == "clauses[2].metric"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"repetitions": {"min": 1, "max": 8}}, "repetitions.min"),
        ({"repetitions": {"min": 9, "max": 8}}, "repetitions.min"),
        ({"repetitions": {"min": 3}}, "repetitions.max"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": "0.9"}, "confidence"),
        ({"tiers": [4, 0]}, "tiers"),
        ({"arms": {"baseline": "resident", "offload": "magic"}}, "arms.offload"),
        (
            {
                "validity": {
                    "max_failed_pct": 1,
                    "require_kv_exceeds_vram": True,
                    "min_external_hit_rate": 2,
                }
            },
            "validity.min_external_hit_rate",
        ),
        (
            {"validity": {"max_failed_pct": 1, "min_external_hit_rate": None}},
            "validity.require_kv_exceeds_vram",
        ),
    ],
)
def test_the_rest_of_the_spec_the_engine_reads_is_checked_too(changes, field):
    with pytest.raises(ClauseError) as caught:
        parse_g3_spec(g3_spec(**changes))
    assert caught.value.field == field


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 40) | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
clause_like = st.fixed_dictionaries(
    {},
    optional={
        "metric": st.sampled_from([*sorted(KNOWN_METRICS), "vram"]) | json_values,
        "compare": st.sampled_from(["offload/baseline", "recompute/offload", "a/b", "x"])
        | json_values,
        "change": st.sampled_from(["reduction", "gain", "ratio"]) | json_values,
        "at_least_pct": st.floats() | json_values,
        "at_least": st.floats() | json_values,
        "tiers": st.sampled_from(["all", [8], [4, 8], [3]]) | json_values,
        "extra": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(clause_like | json_values, min_size=0, max_size=4), json_values)
def test_any_clause_list_either_parses_or_raises_a_clause_error(clauses, tiers):
    spec = g3_spec(tiers=[4, 8])
    spec["clauses"] = clauses
    if isinstance(tiers, list):
        spec["tiers"] = tiers
    try:
        parsed = parse_clauses(spec)
    except ClauseError as error:
        assert error.field and error.message
        return
    for item in parsed:
        assert isinstance(item, Clause) and item.metric in KNOWN_METRICS
        assert math.isfinite(item.bound_ratio) and item.bound_ratio > 0
        assert set(item.tiers) <= set(spec["tiers"])


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["arms", "tiers", "repetitions", "confidence", "clauses", "validity"]),
        json_values,
    )
)
def test_any_damage_to_a_spec_gives_a_clause_error_not_a_crash(damage):
    spec = g3_spec()
    spec.update(damage)
    try:
        parse_g3_spec(spec)
    except ClauseError as error:
        assert error.field
