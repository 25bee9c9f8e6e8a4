"""A trace of a million lines is read as a stream: the reader's memory does not grow with it,
and a file's first records come out before its end is read."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners.traces.readers.formats import read_trace_file
from runners.traces.readers.mooncake import read_mooncake
from runners.traces.records import TraceError

LINES = 1_000_000
PEAK_LIMIT_BYTES = 1024 * 1024  # the lines are ~60 MB; the records would be several times that


def synthetic_lines() -> Iterator[str]:
    row = '{{"timestamp": {0}, "input_length": 600, "output_length": 1, "hash_ids": [{0}, 1]}}\n'
    return (row.format(i) for i in range(LINES))


@pytest.mark.slow  # a million lines under tracemalloc: about 50 s of CPU
def test_a_million_line_trace_is_read_in_bounded_memory():
    tracemalloc.start()
    try:
        count = sum(1 for _ in read_mooncake(synthetic_lines()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == LINES
    assert peak < PEAK_LIMIT_BYTES, f"peak {peak} bytes"


def test_a_files_records_come_out_before_a_bad_line_further_on(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    good = '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
    path.write_text(good * 2 + "not json\n")
    records = read_trace_file(path, "mooncake")
    assert next(records).input_tokens == 1 and next(records).input_tokens == 1
    with pytest.raises(TraceError) as caught:
        next(records)
    assert caught.value.line == 3
