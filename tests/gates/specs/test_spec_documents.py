"""The typed spec (documents.spec) says key for key what the JSON schema says, and parse_spec is
the edge that turns JSON into it."""

from __future__ import annotations

import types
import typing

import pytest

from documents import spec as documents
from gates.specs.schema import GATE_KINDS, SCHEMAS
from gates.specs.validation import InvalidSpecError, default_spec, parse_spec

TYPED = {
    "G1": documents.G1Spec,
    "G2": documents.G2Spec,
    "G3": documents.G3Spec,
    "G4": documents.G4Spec,
}


def _typed_dicts(hint: object) -> list[type]:
    """The TypedDicts inside a hint: X, X | None, list[X]."""
    if typing.is_typeddict(hint):
        return [typing.cast(type, hint)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType, list):
        return [found for arg in typing.get_args(hint) for found in _typed_dicts(arg)]
    return []


def _mismatches(schema: dict, typed: type, where: str) -> list[str]:
    """Every key the schema and the TypedDict disagree on, down through nested objects."""
    properties = schema["properties"]
    declared = typed.__required_keys__ | typed.__optional_keys__
    problems = [f"{where}.{key}: in the schema only" for key in set(properties) - declared]
    problems += [f"{where}.{key}: in the type only" for key in declared - set(properties)]
    required = set(schema.get("required", []))
    problems += [
        f"{where}.{key}: required is {key in required} in the schema"
        for key in declared & set(properties)
        if (key in typed.__required_keys__) != (key in required)
    ]
    hints = typing.get_type_hints(typed)
    for key in declared & set(properties):
        part = properties[key]
        part = part.get("items", part) if part.get("type") == "array" else part
        nested = _typed_dicts(hints[key])
        if "properties" in part:
            if not nested:
                problems.append(f"{where}.{key}: an object in the schema, not a TypedDict")
            for inner in nested:
                problems += _mismatches(part, inner, f"{where}.{key}")
        elif nested:
            problems.append(f"{where}.{key}: a TypedDict, not an object in the schema")
    return problems


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_the_typed_spec_has_the_schemas_keys_and_required_keys(kind):
    assert _mismatches(SCHEMAS[kind], TYPED[kind], kind) == []


@pytest.mark.parametrize(
    ("literal", "vocabulary"),
    [
        (documents.GateKind, "GATE_KINDS"),
        (documents.Dataset, "DATASETS"),
        (documents.ArmKind, "ARM_KINDS"),
        (documents.ChangeKind, "CHANGE_KINDS"),
    ],
)
def test_the_schema_vocabulary_is_the_typed_literal(literal, vocabulary):
    from gates.specs import schema

    assert list(getattr(schema, vocabulary)) == list(typing.get_args(literal))


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_parse_spec_returns_the_accepted_document_itself(kind):
    document = default_spec(kind)
    assert parse_spec(document) is document
    assert parse_spec(document, kind) is document


def test_parse_spec_refuses_a_bad_document_naming_every_field():
    document = default_spec("G3")
    document["confidence"] = 1.5
    document["tiers"] = []
    with pytest.raises(InvalidSpecError) as caught:
        parse_spec(document)
    assert {error.field for error in caught.value.errors} == {"confidence", "tiers"}


@pytest.mark.parametrize("document", [None, [], {"gate": "G9"}, {"version": 1}])
def test_parse_spec_refuses_what_is_no_gate_spec(document):
    with pytest.raises(InvalidSpecError):
        parse_spec(document)


def test_parse_spec_holds_a_document_to_the_kind_it_is_given():
    with pytest.raises(InvalidSpecError) as caught:
        parse_spec(default_spec("G1"), "G2")
    assert "gate" in {error.field for error in caught.value.errors}
