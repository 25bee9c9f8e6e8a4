"""JSON Lines and streamed JSON arrays, read one object at a time with its line number. Pure:
both take text already opened by formats.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from runners.traces.records import TraceError

CHUNK_CHARS = 1 << 16
_DECODER = json.JSONDecoder()


def json_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as error:
            raise TraceError(number, "json", f"not JSON: {error.msg}") from None
        yield number, _object(value, number)


def json_array_items(stream: TextIO) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each item of a top-level JSON array, reading the stream in
    chunks so that a multi-gigabyte ShareGPT file never sits in memory whole."""
    reader = _ArrayReader(stream)
    reader.expect("[")
    if reader.peek() == "]":
        return
    while True:
        line, value = reader.item()
        yield line, _object(value, line)
        if reader.peek() == "]":
            return
        reader.expect(",")


def _object(value: object, line: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TraceError(
            line, "json", f"a record must be a JSON object, got {type(value).__name__}"
        )
    return value


class _ArrayReader:
    """A window over the stream: `pos` indexes `buffer`, `line` is the line at `pos`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.buffer = ""
        self.pos = 0
        self.line = 1
        self.ended = False

    def peek(self) -> str:
        self._skip_space()
        return self.buffer[self.pos] if self.pos < len(self.buffer) else ""

    def expect(self, char: str) -> None:
        found = self.peek()
        if found != char:
            raise TraceError(self.line, "json", f"expected {char!r}, found {found or 'the end'!r}")
        self._advance(self.pos + 1)

    def item(self) -> tuple[int, object]:
        self._skip_space()
        start_line = self.line
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as error:
                if self.ended:
                    raise TraceError(start_line, "json", f"not JSON: {error.msg}") from None
                self._read_more()
                continue
            self._advance(end)
            return start_line, value

    def _skip_space(self) -> None:
        while True:
            end = self.pos
            while end < len(self.buffer) and self.buffer[end] in " \t\r\n":
                end += 1
            self._advance(end)
            if end < len(self.buffer) or self.ended:
                return
            self._read_more()

    def _advance(self, end: int) -> None:
        self.line += self.buffer.count("\n", self.pos, end)
        self.pos = end

    def _read_more(self) -> None:
        # Grow geometrically so that one large item is re-parsed O(log size) times, not O(size).
        chunk = self.stream.read(max(CHUNK_CHARS, len(self.buffer) - self.pos))
        self.ended = not chunk
        self.buffer = self.buffer[self.pos :] + chunk
        self.pos = 0
