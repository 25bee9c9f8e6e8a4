"""The one spec validator: every default template is valid, every bad field is named, and what
it accepts the engine decides."""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.decisions import decide_gate
from gates.specs.schema import GATE_KINDS
from gates.specs.validation import FieldError, default_spec, spec_digest, validate_spec


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


def spec_with(kind: str, mutate) -> dict:
    document = default_spec(kind)
    mutate(document)
    return document


def refusal(kind: str, document: dict, field: str) -> FieldError:
    """The error naming `field`; fails listing every error when there is none."""
    errors = validate_spec(kind, document)
    found = [error for error in errors if error.field == field]
    assert found, errors
    return found[0]


def g3_with_clause(**changes) -> dict:
    """The G3 template with its first clause replaced; a None value leaves the key out."""
    clause = {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "at_least_pct": 25,
        "tiers": "all",
        **changes,
    }
    return spec_with("G3", lambda d: d["clauses"].__setitem__(0, drop_nones(clause)))


def drop_nones(values: dict) -> dict:
    return {key: value for key, value in values.items() if value is not None}


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"metric": "ttft_p42"}, "clauses[0].metric", "unknown metric 'ttft_p42'"),
        ({"compare": "offload/ghost"}, "clauses[0].compare", "unknown arm 'ghost'"),
        ({"compare": "offload"}, "clauses[0].compare", "does not match"),
        ({"compare": "offload/offload"}, "clauses[0].compare", "with itself"),
        ({"change": "halving"}, "clauses[0].change", "is not one of"),
        ({"at_least_pct": -25}, "clauses[0].at_least_pct", "minimum of 0"),
        ({"at_least_pct": 0}, "clauses[0].at_least_pct", "minimum of 0"),
        ({"at_least_pct": 100}, "clauses[0].at_least_pct", "below 100"),
        ({"at_least_pct": math.nan}, "clauses[0].at_least_pct", "not of type 'number'"),
        ({"at_least_pct": math.inf}, "clauses[0].at_least_pct", "not of type 'number'"),
        ({"at_least_pct": True}, "clauses[0].at_least_pct", "not of type 'number'"),
        ({"at_least_pct": None}, "clauses[0].at_least_pct", "is required"),
        (
            {"change": "ratio", "at_least_pct": None, "at_least": -2},
            "clauses[0].at_least",
            "minimum of 0",
        ),
        ({"change": "ratio", "at_least": 2}, "clauses[0].at_least_pct", "does not apply"),
        ({"tiers": [32]}, "clauses[0].tiers", "tier 32 is not one of the spec's tiers"),
        ({"tiers": [8, 8]}, "clauses[0].tiers", "not valid"),
        ({"tiers": [8.0]}, "clauses[0].tiers", "not valid"),
        ({"tiers": []}, "clauses[0].tiers", "not valid"),
        ({"tiers": "some"}, "clauses[0].tiers", "not valid"),
        ({"tier": 8}, "clauses[0].tier", "not a known field"),
    ],
)
def test_a_bad_clause_is_refused_with_its_field(changes, field, words):
    assert words in refusal("G3", g3_with_clause(**changes), field).message


def test_the_field_names_the_index_of_the_bad_clause():
    document = spec_with("G3", lambda d: d["clauses"][2].update(metric="vram"))
    assert [e.field for e in validate_spec("G3", document)] == ["clauses[2].metric"]


def test_a_clause_may_compare_only_arms_the_spec_has():
    document = spec_with("G3", lambda d: d["arms"].pop("recompute"))
    assert "unknown arm 'recompute'" in refusal("G3", document, "clauses[3].compare").message


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(repetitions={"min": 1, "max": 8}), "repetitions.min"),
        (lambda d: d.update(repetitions={"min": 3.0, "max": 8}), "repetitions.min"),
        (lambda d: d.update(repetitions={"min": 3}), "repetitions.max"),
        (lambda d: d.update(confidence=1.0), "confidence"),
        (lambda d: d.update(confidence=math.nan), "confidence"),
        (lambda d: d.update(confidence="0.9"), "confidence"),
        (lambda d: d.update(tiers=[4, 0]), "tiers[1]"),
        (lambda d: d["arms"].update(offload="magic"), "arms.offload"),
        (lambda d: d["validity"].update(min_external_hit_rate=2), "validity.min_external_hit_rate"),
        (
            lambda d: d["validity"].update(min_external_hit_rate=None),
            "validity.min_external_hit_rate",
        ),
        (
            lambda d: d["validity"].pop("require_kv_exceeds_vram"),
            "validity.require_kv_exceeds_vram",
        ),
    ],
)
def test_the_rest_of_a_g3_spec_the_engine_reads_is_checked_too(mutate, field):
    refusal("G3", spec_with("G3", mutate), field)


@pytest.mark.parametrize(
    ("expect", "field", "words"),
    [
        ({"gpu_model_pattern": "MI300X("}, "expect.gpu_model_pattern", "regular expression"),
        ({"kernel_pattern": "[6"}, "expect.kernel_pattern", "regular expression"),
        ({"kernel_pattern": "6{4294967296}"}, "expect.kernel_pattern", "too large"),
        ({"vllm_min": "latest"}, "expect.vllm_min", "does not match"),
        ({"gpu_count": -1}, "expect.gpu_count", "minimum of 1"),
        ({"gpu_vendor": "intel"}, "expect.gpu_vendor", "is not one of"),
    ],
)
def test_a_bad_g1_expectation_is_refused_with_its_field(expect, field, words):
    document = spec_with("G1", lambda d: d["expect"].update(expect))
    assert words in refusal("G1", document, field).message


def test_a_g2_noise_floor_must_name_a_known_metric():
    document = spec_with("G2", lambda d: d["noise_floor"].update(metric="vram_p50"))
    assert "unknown metric 'vram_p50'" in refusal("G2", document, "noise_floor.metric").message


def test_a_negative_g4_limit_is_refused():
    document = spec_with("G4", lambda d: d["limits"].update(max_crashes=-1))
    refusal("G4", document, "limits.max_crashes")


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        # Once accepted by the engine's own checks (2 to 1000 repetitions, any number of tiers).
        (lambda d: d.update(repetitions={"min": 3, "max": 1000}), "repetitions.max"),
        (lambda d: d.update(tiers=list(range(1, 18))), "tiers"),
    ],
)
def test_a_spec_only_the_old_engine_checks_accepted_is_refused(mutate, field):
    refusal("G3", spec_with("G3", mutate), field)


def test_a_spec_at_the_validators_limits_is_decided():
    document = spec_with(
        "G3", lambda d: d.update(repetitions={"min": 4, "max": 50}, tiers=list(range(1, 17)))
    )
    assert validate_spec("G3", document) == []
    result = decide_gate(document, [], {"kv_exceeds_vram": True})
    assert result["verdict"] == "inconclusive"
    assert result["inputs"]["plan"]["looks"] == [4, 26, 50]
    assert result["inputs"]["tiers"] == list(range(1, 17))


EMPTY_EVIDENCE = {"G1": {}, "G2": {}, "G3": [], "G4": []}


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_every_valid_template_is_decided_and_without_evidence_is_inconclusive(kind):
    result = decide_gate(default_spec(kind), EMPTY_EVIDENCE[kind])
    assert (result["gate"], result["verdict"]) == (kind, "inconclusive")


def test_a_window_longer_than_the_soak_is_refused():
    document = default_spec("G4")
    document["duration_h"], document["window_min"] = 0.5, 45
    assert validate_spec("G4", document) == [
        FieldError("window_min", "a window cannot be longer than the soak")
    ]


def test_a_soak_of_too_many_windows_is_refused_naming_the_shortest_window_allowed():
    document = default_spec("G4")
    document["duration_h"], document["window_min"] = 72, 0.1  # 6 s windows: 43,200
    (error,) = validate_spec("G4", document)
    assert error.field == "window_min"
    assert "43,200 windows; at most 30,000" in error.message and "0.144 minutes" in error.message
    document["window_min"] = 10 / 60  # 10 s windows: 25,920, the soak bench's
    assert validate_spec("G4", document) == []


@pytest.mark.parametrize(
    ("retention", "field", "message"),
    [
        ({"keep_every_nth_window": 0, "keep_after_sealed_days": 30}, "keep_every_nth_window", "1"),
        ({"keep_every_nth_window": 6.5, "keep_after_sealed_days": 30}, "keep_every_nth_window", ""),
        ({"keep_every_nth_window": 6, "keep_after_sealed_days": -1}, "keep_after_sealed_days", ""),
        ({"keep_every_nth_window": 6}, "keep_after_sealed_days", "is required"),
        ({"keep_every_nth_window": 6, "keep_after_sealed_days": 1, "keep": 1}, "keep", "known"),
    ],
)
def test_a_bad_retention_policy_is_refused_naming_its_field(retention, field, message):
    document = default_spec("G4")
    document["retention"] = retention
    errors = validate_spec("G4", document)
    assert [error.field for error in errors] == [f"retention.{field}"]
    assert message in errors[0].message


def test_the_g4_template_states_a_retention_policy_and_a_spec_may_leave_it_out():
    document = default_spec("G4")
    assert document["retention"] == {"keep_every_nth_window": 6, "keep_after_sealed_days": 30}
    del document["retention"]
    assert validate_spec("G4", document) == []


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


@pytest.mark.parametrize("kind", ["G2", "G3", "G4"])
@pytest.mark.parametrize(
    "model_path, problem",
    [
        ("/models/../etc/shadow", "must not contain '.' or '..' components"),
        ("/models/./llama", "must not contain '.' or '..' components"),
        ("llama; rm -rf /", "must be an absolute path or a hub model id"),
        ("$(curl evil)", "must be an absolute path or a hub model id"),
        ("/models/llama 70b", "must be an absolute path"),
    ],
)
def test_a_model_path_a_run_start_would_refuse_is_refused_at_save_naming_it(
    kind, model_path, problem
):
    document = copy.deepcopy(default_spec(kind))
    document["server"] = {**document.get("server", {}), "model_path": model_path}
    errors = validate_spec(kind, document)
    assert [e.field for e in errors] == ["server.model_path"]
    assert problem in errors[0].message


@pytest.mark.parametrize("model_path", ["/models/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"])
def test_a_model_path_a_run_start_takes_is_accepted(model_path):
    document = copy.deepcopy(default_spec("G3"))
    document["server"] = {**document.get("server", {}), "model_path": model_path}
    assert validate_spec("G3", document) == []
