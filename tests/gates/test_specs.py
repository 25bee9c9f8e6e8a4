from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.specs import GATE_KINDS, FieldError, default_spec, spec_digest, validate_spec


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_every_default_template_is_valid(kind):
    assert validate_spec(kind, default_spec(kind)) == []


def test_the_g3_template_carries_the_reference_thresholds():
    clauses = default_spec("G3")["clauses"]
    assert [
        (c["metric"], c.get("at_least_pct", c.get("at_least")), c["tiers"]) for c in clauses
    ] == [
        ("ttft_p50", 25, "all"),
        ("output_throughput", 29, [8]),
        ("output_throughput", 40, [16]),
        ("ttft_p50", 8.6, "all"),
    ]


def test_the_g4_template_is_a_72_hour_soak():
    assert default_spec("G4")["duration_h"] == 72


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.pop("tiers"), "tiers"),
        (lambda d: d["tiers"].append(-4), "tiers[3]"),
        (lambda d: d["workload"].update(dataset="dogs"), "workload.dataset"),
        (lambda d: d["workload"].update(extra=1), "workload.extra"),
        (lambda d: d["repetitions"].update(min=9, max=3), "repetitions.min"),
        (lambda d: d["clauses"][0].update(tiers=[32]), "clauses[0].tiers"),
        (lambda d: d["clauses"][2].update(compare="offload/nonexistent"), "clauses[2].compare"),
        (lambda d: d.update(confidence=1.5), "confidence"),
    ],
)
def test_a_bad_g3_spec_names_the_field(mutate, field):
    document = default_spec("G3")
    mutate(document)
    errors = validate_spec("G3", document)
    assert field in [e.field for e in errors], errors


def test_a_window_longer_than_the_soak_is_refused():
    document = default_spec("G4")
    document["duration_h"], document["window_min"] = 0.5, 45
    assert validate_spec("G4", document) == [
        FieldError("window_min", "a window cannot be longer than the soak")
    ]


def test_the_digest_ignores_key_order_but_not_values():
    document = default_spec("G3")
    reordered = dict(reversed(list(copy.deepcopy(document).items())))
    assert spec_digest(reordered) == spec_digest(document)
    document["tiers"] = [4, 8]
    assert spec_digest(document) != spec_digest(reordered)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
spec_like = st.fixed_dictionaries(
    {},
    optional={
        key: json_values
        for key in (
            "gate",
            "version",
            "workload",
            "arms",
            "tiers",
            "repetitions",
            "confidence",
            "clauses",
            "validity",
            "stop_loss",
            "expect",
            "limits",
            "duration_h",
            "window_min",
        )
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(GATE_KINDS), document=json_values | spec_like)
def test_random_documents_only_ever_yield_field_errors(kind, document):
    errors = validate_spec(kind, document)
    assert all(isinstance(e, FieldError) and e.field and e.message for e in errors)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_mutating_one_field_of_a_valid_spec_never_crashes(data):
    kind = data.draw(st.sampled_from(GATE_KINDS))
    document = default_spec(kind)
    key = data.draw(st.sampled_from(sorted(document)))
    document[key] = data.draw(json_values)
    errors = validate_spec(kind, document)
    assert all(isinstance(e, FieldError) for e in errors)
