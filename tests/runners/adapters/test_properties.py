"""Property tests: whatever the input, an adapter returns clean JSON data or raises AdapterError.

Random JSON, truncated and mutated real fixtures, NaN/Infinity, huge numbers, deep nesting and
binary bytes; nothing else may escape, and no missing number may come out as 0.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.adapters import ADAPTERS, AdapterError, parse
from runners.adapters.vllm_bench import parse_vllm_bench
from tests.runners.adapters.golden import fixture_files

FIXTURES = {path.name: path.read_bytes() for path in fixture_files()}
JSON_FIXTURES = {
    name: json.loads(data) for name, data in FIXTURES.items() if name.endswith(".json")
}
TOOLS = [None, *ADAPTERS]
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HOSTILE_NUMBERS = st.sampled_from(
    [math.nan, math.inf, -math.inf, 10**400, -(10**30), 2**63, 1e308, -1.0, 0.5, True]
)
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)


def _outcome(data: str | bytes, tool: str | None) -> dict[str, Any] | None:
    """The parse result, or None after checking the refusal is one clean AdapterError line."""
    try:
        result = parse(data, tool=tool, source="prop-input")
    except AdapterError as error:
        message = str(error)
        assert message.startswith("prop-input: ") and "\n" not in message
        return None
    # A result must be plain JSON: no NaN or Infinity may reach the gates.
    json.dumps(result, allow_nan=False)
    return result


@PROPERTY
@given(value=JSON_VALUES, tool=st.sampled_from(TOOLS))
def test_random_json_gives_a_result_or_an_adapter_error(value, tool):
    _outcome(json.dumps(value), tool)


@PROPERTY
@given(name=st.sampled_from(sorted(FIXTURES)), cut=st.floats(0, 1), tool=st.sampled_from(TOOLS))
def test_a_truncated_real_file_gives_a_result_or_an_adapter_error(name, cut, tool):
    data = FIXTURES[name]
    _outcome(data[: int(len(data) * cut)], tool)


def _leaf_paths(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for key, child in value.items() for p in _leaf_paths(child, (*path, key))]
    if isinstance(value, list):
        return [p for index, child in enumerate(value) for p in _leaf_paths(child, (*path, index))]
    return [path]


def _replace(document: Any, path: tuple, new: Any) -> Any:
    changed = copy.deepcopy(document)
    holder = changed
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = new
    return changed


@PROPERTY
@given(
    name=st.sampled_from(sorted(JSON_FIXTURES)),
    data=st.data(),
    new=HOSTILE_NUMBERS | JSON_VALUES,
    tool=st.sampled_from(TOOLS),
)
def test_a_real_json_file_with_one_hostile_value_gives_a_result_or_an_adapter_error(
    name, data, new, tool
):
    document = JSON_FIXTURES[name]
    paths = _leaf_paths(document)
    path = data.draw(st.sampled_from(paths)) if paths and paths != [()] else None
    if path:
        document = _replace(document, path, new)
    _outcome(json.dumps(document), tool)


@PROPERTY
@given(data=st.binary(min_size=1, max_size=300), tool=st.sampled_from(TOOLS))
def test_binary_bytes_give_an_adapter_error_or_a_result(data, tool):
    _outcome(data, tool)


@PROPERTY
@given(text=st.text(max_size=300), tool=st.sampled_from(TOOLS))
def test_random_text_gives_a_result_or_an_adapter_error(text, tool):
    _outcome(text, tool)


@PROPERTY
@given(
    line=st.sampled_from(
        [
            'vllm:prefix_cache_hits_total{engine="0",model_name="m"} ',
            'vllm:cache_config_info{engine="0",kv_offloading_size="',
            "MemTotal:       ",
            "0, NVIDIA H100, GPU-a, 00000000:18:00.0, 550.54.15, ",
            "Filesystem 1B-blocks Used Available Use% Mounted on\n/dev/sda ",
        ]
    ),
    tail=st.text(max_size=40),
    tool=st.sampled_from(TOOLS),
)
def test_a_plausible_start_with_a_random_ending_gives_a_result_or_an_adapter_error(
    line, tail, tool
):
    _outcome(line + tail + "\n", tool)


@pytest.mark.parametrize("opener", ["[", '{"a":', "<a>"])
@pytest.mark.parametrize("tool", TOOLS)
def test_deeply_nested_input_is_refused_cleanly(opener, tool):
    _outcome(opener * 200_000, tool)


RUN_FIELDS = {
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
    "total_token_throughput": "total_token_throughput",
    "max_concurrency": "max_concurrency",
    "total_input_tokens": "total_input_tokens",
    "mean_ttft_ms": None,
    "p99_itl_ms": None,
}
NORMAL_RUN = JSON_FIXTURES["er0080__bench_serve_v0.25.1__opt-125m_cpu.json"]


@settings(max_examples=50, deadline=None)
@given(removed=st.sets(st.sampled_from(sorted(RUN_FIELDS)), min_size=1))
def test_a_missing_number_is_reported_as_null_never_as_zero(removed):
    payload = {key: value for key, value in NORMAL_RUN.items() if key not in removed}
    run = parse_vllm_bench(json.dumps(payload))["runs"][0]
    for key in removed:
        if RUN_FIELDS[key]:
            assert run[RUN_FIELDS[key]] is None
    if "mean_ttft_ms" in removed:
        assert "mean" not in run["ttft_ms"]
    if "p99_itl_ms" in removed:
        assert "p99" not in run["itl_ms"]


def test_the_fixture_set_for_properties_covers_every_folder():
    folders = {path.parent.name for path in fixture_files()}
    assert len(folders) == 10
    assert Path(next(iter(fixture_files()))).is_file()
