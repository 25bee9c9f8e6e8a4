"""Typed fields read from one untrusted trace row; each failure is a TraceError naming the
line and the field. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping

from runners.traces.records import TraceError


def required(row: Mapping[str, object], name: str, line: int) -> object:
    if name not in row or row[name] is None:
        raise TraceError(line, name, "missing")
    return row[name]


def integer(row: Mapping[str, object], name: str, line: int) -> int:
    value = required(row, name, line)
    # bool is an int in Python but never a count in a trace.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(line, name, f"must be an integer, got {value!r}")
    return value


def length(row: Mapping[str, object], name: str, line: int) -> int:
    value = integer(row, name, line)
    if value < 0:
        raise TraceError(line, name, f"negative length {value}")
    return value


def number(row: Mapping[str, object], name: str, line: int) -> float:
    value = required(row, name, line)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(line, name, f"must be a finite number, got {value!r}")
    return float(value)


def text(row: Mapping[str, object], name: str, line: int) -> str:
    value = required(row, name, line)
    if not isinstance(value, str):
        raise TraceError(line, name, f"must be a string, got {value!r}")
    return value


def integer_list(row: Mapping[str, object], name: str, line: int) -> tuple[int, ...]:
    value = required(row, name, line)
    if not isinstance(value, list):
        raise TraceError(line, name, f"must be a list of integers, got {type(value).__name__}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise TraceError(line, name, f"must hold integers only, got {item!r}")
    return tuple(value)


def optional_label(row: Mapping[str, object], name: str, line: int) -> str | None:
    """A session label given as a string or an integer, or None when absent."""
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TraceError(line, name, f"must be a string or an integer, got {value!r}")
    return str(value)


def csv_count(value: str | None, name: str, line: int) -> int:
    """A non-negative count from a CSV cell ("472" or "472.0")."""
    try:
        parsed = float(value or "")
    except ValueError:
        raise TraceError(line, name, f"must be a number, got {value!r}") from None
    if not parsed.is_integer():
        raise TraceError(line, name, f"must be a whole number, got {value!r}")
    if parsed < 0:
        raise TraceError(line, name, f"negative length {value}")
    return int(parsed)
