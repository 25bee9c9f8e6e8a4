"""json_limits: depth counted on the text (no recursion), strings PostgreSQL can store."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners import jsonlimits
from runners.jsonlimits import JsonLimitError


def nested(depth: int, key: str | None = None) -> str:
    if key is None:
        return "[" * depth + "1" + "]" * depth
    return f'{{"{key}":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (nested(100_000), "[0][0][0][0][0][0][0][0]..."),
        ('{"document": ' + nested(20_000, "a") + "}", "document.a.a.a.a.a.a.a..."),
        ('{"a": [1, 2, ' + nested(65) + "]}", "a[2][0][0][0][0][0][0]..."),
        (nested(65), "[0][0][0][0][0][0][0][0]..."),
    ],
    ids=["100k-deep-list", "20k-deep-object", "deep-in-third-item", "one-over"],
)
def test_json_nested_deeper_than_the_limit_is_refused_naming_where(text, path):
    with pytest.raises(JsonLimitError) as refused:
        jsonlimits.load(text)
    assert refused.value.path == path
    assert "deeper than 64" in refused.value.problem


def test_json_at_the_limit_loads_and_brackets_inside_strings_do_not_count():
    assert jsonlimits.load(nested(64)) is not None
    text = json.dumps({"prompt": "[" * 500 + "{" * 500, "escaped": '\\"[[[' * 100})
    assert jsonlimits.load(text)["prompt"].startswith("[[")


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        ('{"prompts": ["ok", "a\\u0000b"]}', "prompts[1]", "NUL character U+0000"),
        ('{"a": {"b": [{"c": "\\ud800"}]}}', "a.b[0].c", "lone surrogate U+D800"),
        ('{"a": {"x\\udfff": 1}}', "a.x\\udfff", "key holds a lone surrogate U+DFFF"),
        ('"\\u0000"', "", "NUL character"),
    ],
    ids=["nul-in-list", "surrogate-nested", "surrogate-key", "top-level"],
)
def test_strings_postgresql_cannot_store_are_refused_naming_the_field(text, path, problem):
    with pytest.raises(JsonLimitError) as refused:
        jsonlimits.load(text)
    assert refused.value.path == path
    assert problem in refused.value.problem
    str(refused.value).encode()  # the message itself can be logged and sent


def test_a_surrogate_pair_is_one_character_and_loads():
    assert jsonlimits.load('["\\ud83d\\ude00"]') == ["\U0001f600"]


@pytest.mark.parametrize("text", ["[NaN]", '{"a": Infinity}', "-Infinity"])
def test_non_json_constants_are_refused(text):
    with pytest.raises(ValueError, match="not a JSON number"):
        jsonlimits.load(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def depth_of(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


@given(json_values, st.integers(min_value=0, max_value=8))
def test_the_text_scan_agrees_with_the_parsed_depth(value, limit):
    text = json.dumps(value, ensure_ascii=False)
    if depth_of(value) > limit:
        with pytest.raises(JsonLimitError):
            jsonlimits.check_depth(text, limit)
    else:
        jsonlimits.check_depth(text, limit)
