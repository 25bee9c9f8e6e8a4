"""Property tests: whatever the measurements hold, decide_g3 returns a strict-JSON verdict with its
reasons or raises an EvidenceError naming the field; nothing else escapes. Every spec is one the
validator accepted: generated specs go through validate_spec first, and what it accepts is
decided."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.decisions import VERDICTS, EvidenceError, decide_g3, decide_gate, parse_clauses
from gates.specs.validation import validate_spec
from tests.gates.decisions.test_clauses import near_valid_clauses
from tests.gates.decisions.test_g3 import g3_spec, measurement, paired

SPEC = g3_spec(
    clauses=[
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 25,
            "tiers": "all",
        },
        {
            "metric": "output_throughput",
            "compare": "offload/baseline",
            "change": "gain",
            "at_least_pct": 10,
            "tiers": [8],
        },
    ]
)
numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.just(10**400)
values = st.recursive(
    st.none() | st.booleans() | numbers | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
places = st.sampled_from(
    [
        ("metrics", "completed"),
        ("metrics", "failed"),
        ("metrics", "max_concurrency"),
        ("metrics", "output_throughput"),
        ("metrics", "ttft_ms"),
        ("ttft_ms", "median"),
        ("server", "prefix_caching"),
        ("server", "offload_enabled"),
        ("server", "external_hit_rate"),
        ("server", "peak_running"),
        ("top", "arm"),
        ("top", "tier"),
        ("top", "repetition"),
        ("top", "metrics"),
        ("top", "server"),
    ]
)
damage = st.lists(st.tuples(st.integers(0, 11), places, values | numbers), max_size=4)


def apply(rows: list[dict], changes: list) -> None:
    for index, (section, key), value in changes:
        row = rows[index]
        if section == "top":
            row[key] = value
        elif section == "ttft_ms":
            if isinstance(row.get("metrics"), dict) and isinstance(
                row["metrics"].get("ttft_ms"), dict
            ):
                row["metrics"]["ttft_ms"][key] = value
        elif isinstance(row.get(section), dict):
            row[section][key] = value


def assert_well_formed(result: dict) -> None:
    json.dumps(result, allow_nan=False)
    assert result["verdict"] in VERDICTS
    assert result["reasons"], "every verdict carries its reasons"
    assert result["plan"]["action"] in ("decide", "run")
    for cell in result["clauses"]:
        assert cell["verdict"] in VERDICTS and cell["cause"]
        # An end beyond the readable cap is None ("unbounded"); the others stay in order.
        shown = [cell[key] for key in ("low", "estimate", "high") if cell[key] is not None]
        assert shown == sorted(shown)


@settings(max_examples=400, deadline=None)
@given(damage, st.sampled_from([True, False, None]))
def test_damaged_measurements_give_a_verdict_with_reasons_or_an_evidence_error(changes, kv):
    rows = paired([0.6, 0.62, 0.59, 0.7, 0.65, 0.61])
    apply(rows, changes)
    try:
        result = decide_g3(SPEC, rows, {"kv_exceeds_vram": kv})
    except EvidenceError as error:
        assert error.field.startswith("measurements")
        return
    assert_well_formed(result)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(min_value=1e-300, max_value=1e300),
            st.floats(min_value=1e-300, max_value=1e300),
        ),
        max_size=9,
    )
)
def test_extreme_but_finite_metric_values_still_give_a_strict_json_verdict(pairs):
    rows = []
    for rep, (base, offload) in enumerate(pairs, start=1):
        for arm, ttft in (("baseline", base), ("offload", offload)):
            row = paired([1.0])[0 if arm == "baseline" else 1]
            row.update(repetition=rep)
            row["metrics"]["ttft_ms"]["median"] = ttft
            row["metrics"]["output_throughput"] = 1 / ttft
            rows.append(row)
    assert_well_formed(decide_g3(SPEC, rows, {"kv_exceeds_vram": True}))


@settings(max_examples=150, deadline=None)
@given(values)
def test_measurements_of_any_shape_give_a_verdict_or_an_evidence_error(garbage):
    try:
        result = decide_g3(SPEC, garbage, garbage)
    except EvidenceError as error:
        assert error.field
        return
    assert_well_formed(result)


@st.composite
def g3_specs(draw) -> dict:
    """G3 specs around the validator's limits: most valid, some refused (17 tiers, a budget
    beyond 50 repetitions or below the minimum, a clause on an arm the spec lacks)."""
    tiers = draw(st.lists(st.integers(1, 64), min_size=1, max_size=17, unique=True))
    spec = g3_spec()
    spec.update(
        tiers=tiers,
        repetitions={"min": draw(st.integers(1, 6)), "max": draw(st.integers(2, 60))},
        confidence=draw(st.sampled_from([0.8, 0.9, 0.95])),
        clauses=draw(st.lists(near_valid_clauses(tiers), min_size=1, max_size=3)),
    )
    if draw(st.integers(0, 3)) == 0:
        del spec["arms"]["recompute"]
    return spec


def measured(spec: dict, repetitions: int, seed: int) -> list[dict]:
    """Every metric of each arm at a random level with 5 % noise, so clauses pass, fail or
    stay open."""
    rng = np.random.default_rng(seed)
    level = {arm: rng.lognormal(7, 1) for arm in spec["arms"]}
    rows = []
    for tier in spec["tiers"]:
        for arm in spec["arms"]:
            for rep in range(1, repetitions + 1):
                value = float(level[arm] * rng.lognormal(0, 0.05))
                stats = {"median": value, "p90": value, "p99": value, "mean": value}
                latencies = {f"{family}_ms": stats for family in ("tpot", "itl", "e2el")}
                rates = {"request_throughput": 1 / value, "total_token_throughput": 1 / value}
                rows.append(measurement(arm, rep, value, tier, **latencies, **rates))
    return rows


@settings(max_examples=150, deadline=None)
@given(g3_specs(), st.integers(0, 8), st.integers(0, 2**32 - 1))
def test_a_spec_the_validator_accepts_is_decided_and_one_it_refuses_names_the_field(
    spec, repetitions, seed
):
    errors = validate_spec("G3", spec)
    fields = {error.field for error in errors}
    if len(spec["tiers"]) > 16:
        assert "tiers" in fields
    if spec["repetitions"]["max"] > 50:
        assert "repetitions.max" in fields
    if errors:
        assert all(error.field and error.message for error in errors)
        return
    result = decide_gate(spec, measured(spec, repetitions, seed), {"kv_exceeds_vram": True})
    assert_well_formed(result)
    assert len(result["clauses"]) == sum(len(clause.tiers) for clause in parse_clauses(spec))


def test_a_request_count_past_exact_floats_is_an_evidence_error_not_an_infinite_share():
    # 100 * 1.7e308 / (completed + 1.7e308) overflowed to inf, and the decision was no longer
    # strict JSON (found by the property test above).
    rows = paired([0.6, 0.62, 0.59, 0.7, 0.65, 0.61])
    apply(rows, [(5, ("metrics", "failed"), 1.7e308)])
    with pytest.raises(EvidenceError) as raised:
        decide_g3(SPEC, rows, {"kv_exceeds_vram": True})
    assert raised.value.field == "measurements[5].metrics.failed"
    apply(rows, [(5, ("metrics", "failed"), 2**53)])
    assert_well_formed(decide_g3(SPEC, rows, {"kv_exceeds_vram": True}))
