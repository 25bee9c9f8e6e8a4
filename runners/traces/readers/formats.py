"""The trace formats by name: their default block size, whether they carry prefix information,
and the one place a trace file is opened (streamed, never read whole)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from runners.traces.readers import bailian, mooncake, sharegpt
from runners.traces.readers.jsonl import json_array_items, json_lines
from runners.traces.readers.loadshape import read_azure, read_burstgpt
from runners.traces.records import TraceRecord


@dataclass(frozen=True)
class TraceFormat:
    name: str
    block_tokens: int | None  # the format's default; None: no blocks at all
    chained_ids: bool  # True: an id already stands for its block and every block before it
    time_unit: str | None


FORMATS = {
    "mooncake": TraceFormat("mooncake", mooncake.BLOCK_TOKENS, True, "ms"),
    # The Bailian README does not say its block hashes are chained: chain them ourselves.
    "bailian": TraceFormat("bailian", bailian.BLOCK_TOKENS, False, "s"),
    "burstgpt": TraceFormat("burstgpt", None, False, "s"),
    "azure": TraceFormat("azure", None, False, "datetime"),
    "sharegpt": TraceFormat("sharegpt", sharegpt.BLOCK_TOKENS, True, None),
}


def read_trace_file(
    path: Path, name: str, block_tokens: int | None = None, sessions_in_flight: int = 1
) -> Iterator[TraceRecord]:
    """The file's records, streamed; `block_tokens` None takes the format's default."""
    with path.open(encoding="utf-8", newline="") as stream:
        yield from read_trace_stream(stream, name, block_tokens, sessions_in_flight)


def read_trace_bytes(
    content: bytes, name: str, block_tokens: int | None = None, sessions_in_flight: int = 1
) -> Iterator[TraceRecord]:
    """An uploaded trace's records, decoded as they are read (never a second copy as text)."""
    with io.TextIOWrapper(io.BytesIO(content), encoding="utf-8", newline="") as stream:
        yield from read_trace_stream(stream, name, block_tokens, sessions_in_flight)


def read_trace_stream(
    stream: TextIO, name: str, block_tokens: int | None = None, sessions_in_flight: int = 1
) -> Iterator[TraceRecord]:
    """A seekable text stream's records, in the named format."""
    trace_format = FORMATS[name]
    block = block_tokens or trace_format.block_tokens or 0
    if name == "mooncake":
        yield from mooncake.read_mooncake(stream, block)
    elif name == "bailian":
        yield from bailian.read_bailian(stream, block)
    elif name == "burstgpt":
        yield from read_burstgpt(stream)
    elif name == "azure":
        yield from read_azure(stream)
    else:
        conversations = (
            sharegpt.conversation_records(row, line, block) for line, row in _objects(stream)
        )
        yield from sharegpt.interleave_sessions(conversations, sessions_in_flight)


def trace_block_tokens(name: str, block_tokens: int | None) -> int | None:
    """The block size a trace is read with: None for a load-shape format (no blocks, whatever
    was asked), else the one asked for or the format's default."""
    default = FORMATS[name].block_tokens
    return default and (block_tokens or default)


def _objects(stream: TextIO) -> Iterator[tuple[int, dict[str, Any]]]:
    """A JSON array's items, or one object per line, whichever the file holds."""
    starts_array = stream.read(4096).lstrip().startswith("[")
    stream.seek(0)
    return json_array_items(stream) if starts_array else json_lines(stream)
