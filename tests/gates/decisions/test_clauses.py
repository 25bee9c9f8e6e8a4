"""Clause reading: a valid G3 spec's clauses as dataclasses with their bounds. Bad clauses are
the validator's (tests/gates/specs/test_specs.py); here anything it accepts reads cleanly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.decisions import KNOWN_METRICS, parse_clauses
from gates.decisions.clauses import Clause, parse_g3_spec
from gates.specs.validation import validate_spec
from tests.gates.decisions.test_g3 import g3_spec

TEMPLATE = Path(__file__).resolve().parents[3] / "gates" / "specs" / "templates" / "G3.json"


def test_the_design_template_parses_into_clauses_with_bounds():
    spec = json.loads(TEMPLATE.read_text())
    clauses = parse_clauses(spec)
    assert [c.compare for c in clauses] == ["offload/baseline"] * 3 + ["recompute/offload"]
    assert clauses[0].tiers == (4, 8, 16) and clauses[0].bound_ratio == pytest.approx(0.75)
    assert clauses[1].tiers == (8,) and clauses[1].bound_ratio == pytest.approx(1.29)
    assert clauses[3].change == "ratio" and clauses[3].bound_ratio == 8.6


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
ROLES = ("baseline", "offload", "recompute")


@st.composite
def near_valid_clauses(draw, tiers: list[int]) -> dict:
    """A clause that is valid for a spec with `tiers` and all three arms, unless the drawn
    threshold falls outside its change's range (a reduction of 100 % or more)."""
    change = draw(st.sampled_from(["reduction", "gain", "ratio"]))
    chosen = st.lists(st.sampled_from(tiers), min_size=1, unique=True) if tiers else st.nothing()
    return {
        "metric": draw(st.sampled_from(sorted(KNOWN_METRICS))),
        "compare": "/".join(draw(st.permutations(ROLES))[:2]),
        "change": change,
        "at_least" if change == "ratio" else "at_least_pct": draw(
            st.floats(min_value=0, max_value=120, exclude_min=True)
        ),
        "tiers": draw(st.just("all") | chosen),
    }


def field_errors_only(errors: list) -> bool:
    return bool(errors) and all(error.field and error.message for error in errors)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(near_valid_clauses([4, 8]) | clause_like | json_values, min_size=0, max_size=4),
    json_values,
)
def test_any_clause_list_is_refused_naming_a_field_or_reads_within_the_spec(clauses, tiers):
    spec = g3_spec(tiers=[4, 8])
    spec["clauses"] = clauses
    if isinstance(tiers, list):
        spec["tiers"] = tiers
    errors = validate_spec("G3", spec)
    if errors:
        assert field_errors_only(errors)
        return
    for item in parse_clauses(spec):
        assert isinstance(item, Clause) and item.metric in KNOWN_METRICS
        assert math.isfinite(item.bound_ratio) and item.bound_ratio > 0
        assert set(item.tiers) <= set(spec["tiers"])
        assert item.a in spec["arms"] and item.b in spec["arms"] and item.a != item.b


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["arms", "tiers", "repetitions", "confidence", "clauses", "validity"]),
        json_values,
    )
)
def test_any_damage_to_a_spec_is_refused_naming_a_field_or_reads_cleanly(damage):
    spec = g3_spec()
    spec.update(damage)
    errors = validate_spec("G3", spec)
    if errors:
        assert field_errors_only(errors)
        return
    parsed = parse_g3_spec(spec)
    assert 2 <= parsed.min_repetitions <= parsed.max_repetitions
    assert 0.5 < parsed.confidence < 1
