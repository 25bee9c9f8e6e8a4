"""Mooncake FAST'25 JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (each id
one 512-token block together with every block before it), optional `session_id`. Pure.

A Mooncake-shaped trace converted from a load-shape-only source may carry no `hash_ids`; then no
row may carry them, so a trace is never half prefix-aware.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from runners.traces.readers import fields
from runners.traces.readers.jsonl import json_lines
from runners.traces.records import TraceError, TraceRecord, check_block_count, in_arrival_order

BLOCK_TOKENS = 512


def read_mooncake(lines: Iterable[str], block_tokens: int = BLOCK_TOKENS) -> Iterator[TraceRecord]:
    return in_arrival_order(_rows(lines, block_tokens), "timestamp")


def _rows(lines: Iterable[str], block_tokens: int) -> Iterator[tuple[int, TraceRecord]]:
    with_ids: bool | None = None
    for line, row in json_lines(lines):
        record = mooncake_record(row, line, block_tokens)
        has_ids = record.block_ids is not None
        if with_ids is not None and has_ids != with_ids:
            state = "missing here but present" if with_ids else "present here but missing"
            raise TraceError(line, "hash_ids", f"{state} in the first row")
        with_ids = has_ids
        yield line, record


def mooncake_record(row: dict[str, Any], line: int, block_tokens: int) -> TraceRecord:
    input_tokens = fields.length(row, "input_length", line)
    block_ids = None
    if "hash_ids" in row:
        block_ids = fields.integer_list(row, "hash_ids", line)
        check_block_count(line, input_tokens, block_ids, block_tokens)
    return TraceRecord(
        arrival_s=fields.number(row, "timestamp", line) / 1000.0,
        input_tokens=input_tokens,
        output_tokens=fields.length(row, "output_length", line),
        block_ids=block_ids,
        session=fields.optional_label(row, "session_id", line),
    )
