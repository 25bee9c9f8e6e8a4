"""docs/specs.md, "how to write a spec", is what gates.specs.reference renders from the schemas
now: every field of every gate kind described, no description of a field that is gone, every
rule it lists enforced, every example a valid spec."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gates.specs.fields import DESCRIPTIONS, RULES, WORKLOAD_PATHS
from gates.specs.reference import (
    REGENERATE,
    description_key,
    property_paths,
    render_reference,
)
from gates.specs.schema import GATE_KINDS, SCHEMAS
from gates.specs.validation import default_spec, validate_spec

DOC = Path(__file__).resolve().parents[3] / "docs" / "specs.md"


def rendered() -> str:
    return render_reference(SCHEMAS, {kind: default_spec(kind) for kind in GATE_KINDS})


def doc_examples() -> dict[str, dict]:
    blocks = re.findall(r"```json\n(.*?)\n```", DOC.read_text(), flags=re.DOTALL)
    return {example["gate"]: example for example in map(json.loads, blocks)}


def test_the_page_is_what_the_generator_renders_from_the_schema_now():
    page, now = DOC.read_text(), rendered()
    first = next((i for i, (a, b) in enumerate(zip(page, now, strict=False)) if a != b), None)
    assert page == now, (
        f"docs/specs.md differs from what the schema renders now (from line "
        f"{page[:first].count(chr(10)) + 1 if first is not None else 'the end'}): "
        f"run `{REGENERATE}` in the repository root and commit it"
    )


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_every_field_of_the_schema_has_a_description(kind):
    missing = [
        path
        for path in property_paths(SCHEMAS[kind])
        if not DESCRIPTIONS.get(description_key(path), "").strip()
    ]
    assert missing == [], "describe these in gates/specs/fields.py DESCRIPTIONS"


def test_no_description_names_a_field_the_schema_lacks():
    known = {description_key(p) for kind in GATE_KINDS for p in property_paths(SCHEMAS[kind])}
    assert sorted(set(DESCRIPTIONS) - known) == []


def test_every_workload_has_the_fields_the_page_describes_once():
    def at(schema: dict, path: str) -> dict:
        for name in path.split("."):
            schema = schema["properties"][name]
        return schema

    found = [
        at(SCHEMAS[kind], place)
        for kind in GATE_KINDS
        for place in WORKLOAD_PATHS
        if place in set(property_paths(SCHEMAS[kind]))
    ]
    assert len(found) == len(WORKLOAD_PATHS)
    assert all(schema == found[0] for schema in found)


def test_every_rule_on_the_page_names_a_field_of_its_kind():
    odd = [
        (kind, field)
        for kind, rules in RULES.items()
        for field, _ in rules
        if field not in set(property_paths(SCHEMAS[kind]))
    ]
    assert odd == []


def _clause(i: int, **changes: object) -> Callable[[dict], None]:
    def mutate(spec: dict) -> None:
        spec["clauses"][i].update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del spec["clauses"][i][key]

    return mutate


# One way to break each rule the page lists; the validator must name that rule's field.
def _model_path(path: str) -> Callable[[dict], None]:
    return lambda spec: spec.update(server={**spec.get("server", {}), "model_path": path})


_MODEL_PATH_BREAKS = [_model_path("/models/../etc"), _model_path("x; reboot")]
BREAKS: dict[tuple[str, str], list[Callable[[dict], None]]] = {
    ("G2", "server.model_path"): _MODEL_PATH_BREAKS,
    ("G3", "server.model_path"): _MODEL_PATH_BREAKS,
    ("G4", "server.model_path"): _MODEL_PATH_BREAKS,
    ("G1", "expect.gpu_model_pattern"): [lambda s: s["expect"].update(gpu_model_pattern="(")],
    ("G1", "expect.kernel_pattern"): [lambda s: s["expect"].update(kernel_pattern="[")],
    ("G2", "noise_floor.metric"): [lambda s: s["noise_floor"].update(metric="ttft_p42")],
    ("G3", "repetitions.min"): [
        lambda s: s["repetitions"].update(min=2),
        lambda s: s["repetitions"].update(min=5),
        lambda s: s["repetitions"].update(min=30),  # above max
    ],
    ("G3", "repetitions.max"): [lambda s: s["repetitions"].update(max=9)],
    ("G3", "clauses[].metric"): [
        _clause(0, metric="speed"),
        _clause(0, metric="ttft_p99"),
    ],
    ("G3", "clauses[].slo"): [
        _clause(0, metric="goodput"),  # without its slo
        _clause(0, slo={"ttft_ms": 2000}),  # an slo on a latency clause
    ],
    ("G3", "clauses[].arm"): [
        _clause(0, arm="offload"),  # a floor's arm on a ratio clause
        _clause(0, metric="goodput", slo={"ttft_ms": 9}, arm="auditor"),
    ],
    ("G3", "clauses[].compare"): [
        _clause(0, compare=None),
        _clause(0, metric="goodput", slo={"ttft_ms": 9}, arm="offload"),  # a floor comparing
        _clause(0, compare="offload/offload"),
        _clause(0, compare="offload/nobody"),
    ],
    ("G3", "clauses[].at_least_pct"): [
        _clause(0, at_least_pct=100),
        _clause(0, at_least_pct=None),
        _clause(3, at_least_pct=5),
        _clause(0, metric="goodput", slo={"ttft_ms": 9}, arm="offload", at_least_pct=120),
    ],
    ("G3", "clauses[].at_least"): [_clause(0, at_least=2), _clause(3, at_least=None)],
    ("G3", "clauses[].claimed_pct"): [_clause(3, claimed_pct=5)],
    ("G3", "clauses[].claimed"): [_clause(0, claimed=2)],
    ("G3", "clauses[].tiers"): [_clause(1, tiers=[12])],
    ("G4", "window_min"): [lambda s: s.update(duration_h=0.1, window_min=10)],
}


def test_every_rule_on_the_page_has_a_way_to_break_it_here():
    listed = {(kind, field) for kind, rules in RULES.items() for field, _ in rules}
    assert listed == set(BREAKS)


@pytest.mark.parametrize(
    "kind, field, mutate",
    [
        pytest.param(kind, field, mutate, id=f"{kind}-{field}-{i}")
        for (kind, field), mutations in BREAKS.items()
        for i, mutate in enumerate(mutations)
    ],
)
def test_the_validator_enforces_each_rule_the_page_lists(kind, field, mutate):
    spec = copy.deepcopy(default_spec(kind))
    mutate(spec)
    named = {re.sub(r"\[\d+\]", "[]", error.field) for error in validate_spec(kind, spec)}
    assert field in named


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_the_example_of_each_kind_on_the_page_is_a_valid_spec(kind):
    example = doc_examples()[kind]
    assert validate_spec(kind, example) == []


def test_the_page_has_one_example_per_gate_kind():
    assert len(re.findall(r"```json\n", DOC.read_text())) == len(GATE_KINDS)
    assert sorted(doc_examples()) == sorted(GATE_KINDS)
