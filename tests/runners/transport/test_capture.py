"""Bounded output capture and line streaming (runners/transport/capture.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runners.transport.capture import StreamCapture


def collect(max_bytes: int = 1 << 20, max_line_bytes: int = 1 << 16):
    lines: list[tuple[str, str]] = []
    capture = StreamCapture(
        "stdout",
        max_bytes=max_bytes,
        on_line=lambda stream, line: lines.append((stream, line)),
        max_line_bytes=max_line_bytes,
    )
    return capture, lines


def test_it_hands_over_complete_lines_across_chunk_boundaries():
    capture, lines = collect()
    for chunk in (b"fir", b"st\nsec", b"ond\r\n", b"third"):
        capture.feed(chunk)
    assert lines == [("stdout", "first"), ("stdout", "second")]
    capture.finish()
    assert lines[-1] == ("stdout", "third")


def test_it_keeps_only_the_tail_and_says_it_truncated():
    capture = StreamCapture("stderr", max_bytes=10)
    for _ in range(100):
        capture.feed(b"0123456789abcdef")
    assert capture.text == "6789abcdef"
    assert capture.truncated
    assert capture.total_bytes == 1600


def test_it_is_not_truncated_at_exactly_the_cap():
    capture = StreamCapture("stdout", max_bytes=4)
    capture.feed(b"abcd")
    assert capture.text == "abcd"
    assert not capture.truncated


def test_it_splits_a_line_longer_than_the_bound_so_memory_stays_bounded():
    capture, lines = collect(max_line_bytes=8)
    capture.feed(b"x" * 20 + b"\n")
    assert [line for _, line in lines] == ["x" * 8, "x" * 8, "x" * 4]


def test_it_replaces_invalid_utf8_instead_of_failing():
    capture, lines = collect()
    capture.feed(b"caf\xc3\xa9 \xff\n")
    assert lines == [("stdout", "caf\u00e9 \ufffd")]


@given(st.lists(st.binary(max_size=50), max_size=30), st.integers(min_value=1, max_value=64))
def test_lines_and_tail_match_the_whole_stream_however_it_is_chunked(chunks, cap):
    capture, lines = collect(max_bytes=cap, max_line_bytes=1 << 20)
    for chunk in chunks:
        capture.feed(chunk)
    capture.finish()
    whole = b"".join(chunks)
    parts = whole.split(b"\n")
    if parts[-1] == b"":
        parts.pop()  # the stream ended with a newline: no partial last line
    expected = [part.removesuffix(b"\r") for part in parts]
    assert [line for _, line in lines] == [part.decode("utf-8", "replace") for part in expected]
    assert capture.text == whole[-cap:].decode("utf-8", "replace")
    assert capture.truncated == (len(whole) > cap)
