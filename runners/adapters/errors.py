"""The adapters' failure: `AdapterError`, a one-line BenchmarkError naming source and problem.

Imports nothing beyond runners.errors; every adapter module raises through this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from runners.errors import BenchmarkError

# A message is one line an engineer reads in a log; junk input must not turn it into a page.
MAX_PROBLEM_CHARS = 300


class AdapterError(BenchmarkError):
    """Tool output that cannot be read; the message is `<source>: <problem>` on one line."""

    def __init__(self, problem: str, *, source: str = "<input>"):
        self.source = one_line(source, 200)
        self.problem = one_line(problem, MAX_PROBLEM_CHARS)
        super().__init__(f"{self.source}: {self.problem}")


class CounterResetError(AdapterError):
    """A counter went backwards between two /metrics scrapes: the server restarted in between."""


class FormatProblem(ValueError):
    """Raised deep inside an adapter, where the source name is not known; see `reading`."""


@contextmanager
def reading(source: str) -> Iterator[None]:
    """Turn a FormatProblem raised inside the block into an AdapterError naming `source`."""
    try:
        yield
    except FormatProblem as problem:
        raise AdapterError(str(problem), source=source) from None


def one_line(text: str, limit: int) -> str:
    """Collapse whitespace (newlines included) and cut to `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def excerpt(value: object, limit: int = 40) -> str:
    """A short repr of an offending value, safe to put in a one-line message."""
    return one_line(repr(value), limit)
