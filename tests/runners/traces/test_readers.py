"""Each trace format read from small handmade files into the one normalized record."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.traces.readers.bailian import read_bailian
from runners.traces.readers.formats import read_trace_file
from runners.traces.readers.jsonl import json_array_items
from runners.traces.readers.loadshape import read_azure, read_burstgpt
from runners.traces.readers.mooncake import read_mooncake
from runners.traces.readers.sharegpt import conversation_records, interleave_sessions
from runners.traces.records import TraceRecord, block_count


def jsonl(*rows: dict) -> list[str]:
    return [json.dumps(row) + "\n" for row in rows]


def test_mooncake_rows_become_records_in_seconds():
    rows = jsonl(
        {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 1500, "input_length": 512, "output_length": 0, "hash_ids": [1]},
    )
    assert list(read_mooncake(rows)) == [
        TraceRecord(0.0, 600, 5, (1, 2), None, None),
        TraceRecord(1.5, 512, 0, (1,), None, None),
    ]


def test_mooncake_keeps_an_optional_session_and_reads_a_trace_without_hash_ids():
    with_session = jsonl(
        {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [7], "session_id": 3}
    )
    assert next(read_mooncake(with_session)).session == "3"
    no_ids = jsonl({"timestamp": 0, "input_length": 9, "output_length": 1})
    assert next(read_mooncake(no_ids)).block_ids is None


def test_mooncake_skips_blank_lines_and_takes_another_block_size():
    rows = [
        "\n",
        *jsonl({"timestamp": 0, "input_length": 33, "output_length": 1, "hash_ids": [4, 5, 6]}),
    ]
    assert next(read_mooncake(rows, block_tokens=16)).block_ids == (4, 5, 6)


def test_bailian_rows_carry_their_session_root_and_turn():
    base = {"timestamp": 0.5, "input_length": 20, "output_length": 3, "type": "text"}
    rows = jsonl(
        base | {"chat_id": 10, "parent_chat_id": -1, "turn": 1, "hash_ids": [1, 2]},
        base | {"chat_id": 11, "parent_chat_id": 10, "turn": 2, "hash_ids": [1, 2]},
        base | {"chat_id": 12, "parent_chat_id": 11, "turn": 3, "hash_ids": [1, 2]},
        base | {"chat_id": 13, "parent_chat_id": 99, "turn": 2, "hash_ids": [3, 4]},
    )
    records = list(read_bailian(rows))
    assert [(r.session, r.turn) for r in records] == [("10", 1), ("10", 2), ("10", 3), ("99", 2)]
    assert records[0] == TraceRecord(0.5, 20, 3, (1, 2), "10", 1)


def test_burstgpt_reads_seconds_and_lengths_without_blocks():
    text = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "7.5,GPT-4,1087,0,1087,API log\n"
    )
    assert list(read_burstgpt(io.StringIO(text))) == [
        TraceRecord(0.0, 472, 18, None),
        TraceRecord(2.5, 1087, 0, None),
    ]


def test_azure_reads_seven_fractional_digits_relative_to_the_first_row():
    text = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    records = list(read_azure(io.StringIO(text)))
    assert records[0] == TraceRecord(0.0, 374, 44, None)
    assert records[1].arrival_s == pytest.approx(4.314579)


def test_azure_reads_a_zoned_2024_stamp():
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,10,2\n"
    assert next(read_azure(io.StringIO(text))).input_tokens == 10


CONVERSATION = {
    "id": "abc",
    "conversations": [
        {"from": "human", "value": "x" * 100},
        {"from": "gpt", "value": "y" * 40},
        {"from": "human", "value": "z" * 30},
        {"from": "gpt", "value": "w" * 8},
    ],
}


def test_sharegpt_turn_two_resends_turn_one_so_its_blocks_extend_turn_ones():
    first, second = conversation_records(CONVERSATION, line=1, block_tokens=4)
    # "user\n" + 100 + "\n" = 106 bytes -> 27 tokens at 4 bytes each -> 7 blocks of 4 tokens.
    assert (first.input_tokens, first.output_tokens, len(first.block_ids)) == (27, 10, 7)
    full_blocks_of_first = first.block_ids[:6]  # the 7th is partial, rehashed once it fills
    assert second.block_ids[:6] == full_blocks_of_first
    assert second.input_tokens == -(-(106 + 51 + 36) // 4)
    assert (second.session, second.turn) == ("abc", 2)


def test_sharegpt_block_ids_are_deterministic_and_depend_on_the_text():
    again = conversation_records(json.loads(json.dumps(CONVERSATION)), 1, 4)
    assert again == conversation_records(CONVERSATION, 1, 4)
    other = CONVERSATION | {"conversations": [{"from": "human", "value": "q" * 100}]}
    other["conversations"].append({"from": "gpt", "value": "a"})
    assert conversation_records(other, 1, 4)[0].block_ids[0] != again[0].block_ids[0]


def test_sharegpt_a_question_without_an_answer_is_no_request():
    lonely = {"id": 1, "conversations": [{"from": "human", "value": "hi"}]}
    assert conversation_records(lonely, 1) == []


def test_interleaving_sends_one_turn_of_each_open_conversation_in_turn():
    def conv(name: str, turns: int) -> list[TraceRecord]:
        return [TraceRecord(None, 1, 1, (1,), name, t) for t in range(1, turns + 1)]

    order = interleave_sessions([conv("a", 3), conv("b", 1), conv("c", 2)], in_flight=2)
    assert [(r.session, r.turn) for r in order] == [
        ("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3), ("c", 2)
    ]  # fmt: skip
    sequential = interleave_sessions([conv("a", 2), conv("b", 1)])
    assert [(r.session, r.turn) for r in sequential] == [("a", 1), ("a", 2), ("b", 1)]


def test_a_json_array_streams_item_by_item_with_the_line_each_starts_on():
    text = '[\n  {"a": 1},\n  {"b": "x\\ny",\n   "c": [1, 2]}\n]\n'
    assert list(json_array_items(io.StringIO(text))) == [
        (2, {"a": 1}),
        (3, {"b": "x\ny", "c": [1, 2]}),
    ]
    assert list(json_array_items(io.StringIO("  [ ] "))) == []


def test_a_json_array_item_larger_than_a_chunk_is_read_whole(monkeypatch):
    monkeypatch.setattr("runners.traces.readers.jsonl.CHUNK_CHARS", 8)
    big = [{"value": "v" * 100, "n": i} for i in range(3)]
    items = list(json_array_items(io.StringIO(json.dumps(big))))
    assert [item for _, item in items] == big


@pytest.mark.parametrize("layout", ["array", "lines"])
def test_a_sharegpt_file_may_be_an_array_or_one_conversation_per_line(tmp_path: Path, layout: str):
    path = tmp_path / "conversations.json"
    items = [CONVERSATION, CONVERSATION | {"id": "def"}]
    path.write_text(json.dumps(items) if layout == "array" else "".join(jsonl(*items)))
    records = list(read_trace_file(path, "sharegpt", block_tokens=4))
    assert [(r.session, r.turn) for r in records] == [
        ("abc", 1),
        ("abc", 2),
        ("def", 1),
        ("def", 2),
    ]


def test_a_file_is_read_with_the_formats_default_block_size(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    path.write_text(
        "".join(
            jsonl({"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1, 2]})
        )
    )
    assert next(read_trace_file(path, "mooncake")).block_ids == (1, 2)


@given(
    st.lists(st.text(max_size=300), min_size=2, max_size=8),
    st.integers(1, 40),
)
def test_sharegpt_records_meet_the_block_rule_and_extend_their_previous_turn(texts, block):
    speakers = ("human", "gpt")
    turns = [{"from": speakers[i % 2], "value": text} for i, text in enumerate(texts)]
    conversation = {"conversations": turns}
    records = conversation_records(conversation, line=1, block_tokens=block)
    assert len(records) == len(texts) // 2
    for earlier, later in itertools.pairwise(records):
        full = len(earlier.block_ids) - 1  # the last block may be partial, rehashed once it fills
        assert later.block_ids[:full] == earlier.block_ids[:full]
    for record in records:
        assert len(record.block_ids) == block_count(record.input_tokens, block)
