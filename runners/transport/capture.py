"""Bounded capture of one output stream, with optional line-by-line streaming to a callback.

Pure: bytes in, text out; shared by the SSH and local transports. Imports no paramiko.
"""

from __future__ import annotations

from collections.abc import Callable

LineCallback = Callable[[str, str], None]
"""Called as on_line(stream, line) with stream "stdout" or "stderr" and the line without "\\n"."""

DEFAULT_CAPTURE_BYTES = 1 << 20
MAX_LINE_BYTES = 64 << 10


class StreamCapture:
    """Keeps the last `max_bytes` of a stream and hands complete lines to `on_line`.

    The tail is kept, not the head: a tool's summary and its error messages come last.
    """

    def __init__(
        self,
        stream: str,
        *,
        max_bytes: int = DEFAULT_CAPTURE_BYTES,
        on_line: LineCallback | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.stream = stream
        self.total_bytes = 0
        self._max_bytes = max_bytes
        self._on_line = on_line
        self._max_line_bytes = max_line_bytes
        self._tail = bytearray()
        self._pending = bytearray()

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        self._tail += data
        # Trim only when twice over the cap, so trimming costs O(1) amortized per byte.
        if len(self._tail) > 2 * self._max_bytes:
            del self._tail[: len(self._tail) - self._max_bytes]
        if self._on_line is not None:
            self._split_lines(data)

    def finish(self) -> None:
        """Flush a last line that had no newline."""
        if self._on_line is not None and self._pending:
            self._emit_line(bytes(self._pending).removesuffix(b"\r"))
            self._pending.clear()

    @property
    def truncated(self) -> bool:
        return self.total_bytes > self._max_bytes

    @property
    def text(self) -> str:
        kept = self._tail[-self._max_bytes :] if self._max_bytes else b""
        return bytes(kept).decode("utf-8", "replace")

    def _split_lines(self, data: bytes) -> None:
        self._pending += data
        if b"\n" in data:
            *lines, rest = self._pending.split(b"\n")
            for line in lines:
                self._emit_line(bytes(line).removesuffix(b"\r"))
            self._pending = bytearray(rest)
        # A line longer than the bound is delivered in pieces: memory stays bounded.
        while len(self._pending) > self._max_line_bytes:
            self._emit(bytes(self._pending[: self._max_line_bytes]))
            del self._pending[: self._max_line_bytes]

    def _emit_line(self, line: bytes) -> None:
        # Pieces of at most max_line_bytes, whether the line came in one chunk or many.
        for start in range(0, max(len(line), 1), self._max_line_bytes):
            self._emit(line[start : start + self._max_line_bytes])

    def _emit(self, raw: bytes) -> None:
        assert self._on_line is not None
        self._on_line(self.stream, raw.decode("utf-8", "replace"))
