"""Property tests: whatever the measurements hold, decide_g3 returns a strict-JSON verdict with its
reasons or raises an EvidenceError naming the field; nothing else escapes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gates.decisions import VERDICTS, EvidenceError, decide_g3
from tests.gates.decisions.test_g3 import g3_spec, paired

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
        if cell["low"] is not None:
            assert cell["low"] <= cell["estimate"] <= cell["high"]


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
