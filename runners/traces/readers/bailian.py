"""Alibaba/Qwen Bailian JSONL: `chat_id`, `parent_chat_id` (-1 = root), `timestamp` (s),
`input_length`, `output_length`, `type`, `turn`, `hash_ids` (16-token blocks). Pure.

A request's session is the root of its `parent_chat_id` chain, so the map of chat ids to roots
grows with the number of requests (never with their blocks).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from runners.traces.readers import fields
from runners.traces.readers.jsonl import json_lines
from runners.traces.records import TraceError, TraceRecord, check_block_count, in_arrival_order

BLOCK_TOKENS = 16
ROOT = -1


def read_bailian(lines: Iterable[str], block_tokens: int = BLOCK_TOKENS) -> Iterator[TraceRecord]:
    return in_arrival_order(_rows(lines, block_tokens), "timestamp")


def _rows(lines: Iterable[str], block_tokens: int) -> Iterator[tuple[int, TraceRecord]]:
    roots: dict[int, int] = {}
    for line, row in json_lines(lines):
        chat = fields.integer(row, "chat_id", line)
        parent = fields.integer(row, "parent_chat_id", line)
        if parent < ROOT:
            raise TraceError(
                line, "parent_chat_id", f"must be -1 (a root) or a chat id, got {parent}"
            )
        # A parent not seen (cut off by the trace window) roots its own session.
        roots[chat] = chat if parent == ROOT else roots.get(parent, parent)
        fields.text(row, "type", line)
        input_tokens = fields.length(row, "input_length", line)
        block_ids = fields.integer_list(row, "hash_ids", line)
        check_block_count(line, input_tokens, block_ids, block_tokens)
        yield (
            line,
            TraceRecord(
                arrival_s=fields.number(row, "timestamp", line),
                input_tokens=input_tokens,
                output_tokens=fields.length(row, "output_length", line),
                block_ids=block_ids,
                session=str(roots[chat]),
                turn=fields.integer(row, "turn", line),
            ),
        )
