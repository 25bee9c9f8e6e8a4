"""The CSV traces that carry arrivals and lengths but no prefix information ("load shape
only"): BurstGPT (`Timestamp` s, `Request tokens`, `Response tokens`) and Azure LLM inference
(`TIMESTAMP` datetime, `ContextTokens`, `GeneratedTokens`). Pure."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime

from runners.traces.readers.fields import csv_count
from runners.traces.records import TraceError, TraceRecord, in_arrival_order

BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def read_burstgpt(lines: Iterable[str]) -> Iterator[TraceRecord]:
    return in_arrival_order(_rows(lines, BURSTGPT_COLUMNS, _seconds), BURSTGPT_COLUMNS[0])


def read_azure(lines: Iterable[str]) -> Iterator[TraceRecord]:
    return in_arrival_order(_rows(lines, AZURE_COLUMNS, _azure_seconds), AZURE_COLUMNS[0])


def _rows(
    lines: Iterable[str], columns: tuple[str, str, str], clock: Callable[[str, int], float]
) -> Iterator[tuple[int, TraceRecord]]:
    reader = csv.DictReader(lines)
    missing = [name for name in columns if name not in (reader.fieldnames or ())]
    if missing:
        raise TraceError(1, missing[0], "missing column in the header")
    time, inputs, outputs = columns
    start: float | None = None
    for row in reader:
        line = reader.line_num
        if None in row.values():
            raise TraceError(line, columns[-1], "the row has fewer cells than the header")
        arrival = clock(row[time], line)
        start = arrival if start is None else start
        yield (
            line,
            TraceRecord(
                arrival_s=arrival - start,
                input_tokens=csv_count(row[inputs], inputs, line),
                output_tokens=csv_count(row[outputs], outputs, line),
                block_ids=None,
            ),
        )


def _seconds(value: str, line: int) -> float:
    try:
        return float(value)
    except ValueError:
        raise TraceError(line, BURSTGPT_COLUMNS[0], f"must be seconds, got {value!r}") from None


def _azure_seconds(value: str, line: int) -> float:
    """Azure writes seven fractional digits ("2023-11-16 18:15:46.6805900"); datetime takes six."""
    stamp = value.strip()
    head, dot, rest = stamp.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        stamp = f"{head}.{rest[:digits][:6].ljust(6, '0')}{rest[digits:]}"
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        raise TraceError(line, AZURE_COLUMNS[0], f"not a date and time: {value!r}") from None
    # A zone-less stamp is read as UTC, so the host's zone (and its DST jumps) cannot bend gaps.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
