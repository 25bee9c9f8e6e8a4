"""Every refusal names the line and the field a person has to fix."""

from __future__ import annotations

import io
import json

import pytest

from runners.traces.readers.bailian import read_bailian
from runners.traces.readers.jsonl import json_array_items
from runners.traces.readers.loadshape import read_azure, read_burstgpt
from runners.traces.readers.mooncake import read_mooncake
from runners.traces.readers.sharegpt import conversation_records
from runners.traces.records import TraceError

GOOD = {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}


def mooncake_error(*rows: dict | str) -> TraceError:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    with pytest.raises(TraceError) as caught:
        list(read_mooncake(line + "\n" for line in lines))
    return caught.value


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        (GOOD | {"hash_ids": [1]}, "hash_ids", "ceil(1000/512) = 2"),
        (GOOD | {"hash_ids": [1, 2, 3]}, "hash_ids", "3 ids"),
        (GOOD | {"input_length": -1, "hash_ids": []}, "input_length", "negative"),
        (GOOD | {"output_length": -4}, "output_length", "negative"),
        (GOOD | {"timestamp": -1}, "timestamp", "backwards"),
        ({k: v for k, v in GOOD.items() if k != "output_length"}, "output_length", "missing"),
        ({k: v for k, v in GOOD.items() if k != "timestamp"}, "timestamp", "missing"),
        (GOOD | {"input_length": "1000"}, "input_length", "integer"),
        (GOOD | {"input_length": 1000.0}, "input_length", "integer"),
        (GOOD | {"hash_ids": [1, "2"]}, "hash_ids", "integers only"),
        (GOOD | {"hash_ids": 7}, "hash_ids", "list"),
        (GOOD | {"timestamp": True}, "timestamp", "number"),
        ({k: v for k, v in GOOD.items() if k != "hash_ids"}, "hash_ids", "missing here"),
        ('{"timestamp": 0, "input_length": ', "json", "not JSON"),
        ("[1, 2]", "json", "JSON object"),
    ],
)
def test_mooncake_names_the_line_and_field_of_a_bad_row(bad, field, words):
    error = mooncake_error(GOOD, bad)
    assert (error.line, error.field) == (2, field)
    assert words in error.message and str(error).startswith(f"line 2, field {field}:")


def test_the_line_counts_blank_lines():
    error = mooncake_error(GOOD, "", GOOD | {"timestamp": -5})
    assert error.line == 3


def test_bailian_checks_its_16_token_blocks_and_its_own_fields():
    row = {"chat_id": 1, "parent_chat_id": -1, "timestamp": 1.0, "input_length": 33}
    row |= {"output_length": 1, "type": "text", "turn": 1, "hash_ids": [1, 2, 3]}
    assert len(list(read_bailian([json.dumps(row)]))) == 1
    for bad, field in [
        (row | {"hash_ids": [1, 2]}, "hash_ids"),
        (row | {"parent_chat_id": -2}, "parent_chat_id"),
        ({k: v for k, v in row.items() if k != "type"}, "type"),
        ({k: v for k, v in row.items() if k != "turn"}, "turn"),
        (row | {"timestamp": 0.5}, "timestamp"),
    ]:
        with pytest.raises(TraceError) as caught:
            list(read_bailian([json.dumps(row), json.dumps(bad)]))
        assert (caught.value.line, caught.value.field) == (2, field)


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("Timestamp,Request tokens\n1,2\n", 1, "Response tokens"),
        ("Timestamp,Request tokens,Response tokens\n1,2,3\n0.5,2,3\n", 3, "Timestamp"),
        ("Timestamp,Request tokens,Response tokens\n1,-2,3\n", 2, "Request tokens"),
        ("Timestamp,Request tokens,Response tokens\n1,2,x\n", 2, "Response tokens"),
        ("Timestamp,Request tokens,Response tokens\nnoon,2,3\n", 2, "Timestamp"),
        ("Timestamp,Request tokens,Response tokens\n1,2\n", 2, "Response tokens"),
    ],
)
def test_burstgpt_names_the_line_and_column(text, line, field):
    with pytest.raises(TraceError) as caught:
        list(read_burstgpt(io.StringIO(text)))
    assert (caught.value.line, caught.value.field) == (line, field)


def test_azure_refuses_a_stamp_that_is_no_date():
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\nyesterday,1,1\n"
    with pytest.raises(TraceError) as caught:
        list(read_azure(io.StringIO(text)))
    assert (caught.value.line, caught.value.field) == (3, "TIMESTAMP")


@pytest.mark.parametrize(
    ("conversation", "field"),
    [
        ({"id": 1}, "conversations"),
        ({"id": 1, "conversations": "hi"}, "conversations"),
        ({"id": 1, "conversations": [{"from": "alien", "value": "x"}]}, "conversations[0].from"),
        ({"id": 1, "conversations": [{"from": "human"}]}, "conversations[0].value"),
        ({"id": 1, "conversations": ["x"]}, "conversations[0]"),
    ],
)
def test_sharegpt_names_the_message_at_fault(conversation, field):
    with pytest.raises(TraceError) as caught:
        conversation_records(conversation, line=4)
    assert (caught.value.line, caught.value.field) == (4, field)


def test_a_broken_json_array_names_the_line_its_item_starts_on():
    with pytest.raises(TraceError) as caught:
        list(json_array_items(io.StringIO('[\n{"a": 1},\n{"b": \n')))
    assert (caught.value.line, caught.value.field) == (3, "json")
    with pytest.raises(TraceError) as caught:
        list(json_array_items(io.StringIO('{"a": 1}')))
    assert caught.value.field == "json" and "expected '['" in caught.value.message
