"""The normalized request record every trace reader yields, the error a bad trace raises, and
the block-count rule shared by the readers and the characterisation. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

LOAD_SHAPE_ONLY = "load shape only, no prefix information"


class TraceError(ValueError):
    """A trace refused at one line: `line` is 1-based, `field` names what to fix."""

    def __init__(self, line: int, field: str, message: str) -> None:
        super().__init__(f"line {line}, field {field}: {message}")
        self.line = line
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One request. `block_ids` is None when the format carries no prefix information;
    `arrival_s` is None when it carries no timing (ShareGPT)."""

    arrival_s: float | None
    input_tokens: int
    output_tokens: int
    block_ids: tuple[int, ...] | None
    session: str | None = None
    turn: int | None = None


def block_count(input_tokens: int, block_tokens: int) -> int:
    """Blocks a prompt fills: ceil(input/block), the last one partial (GuideLLM's rule,
    workloads.md §6.1)."""
    return -(-input_tokens // block_tokens)


def block_weights(input_tokens: int, blocks: int, block_tokens: int) -> Iterator[int]:
    """Tokens in each block: full blocks, then the remainder in the last one."""
    for index in range(blocks):
        yield min(block_tokens, input_tokens - index * block_tokens)


def check_block_count(line: int, input_tokens: int, block_ids: tuple[int, ...], block: int) -> None:
    expected = block_count(input_tokens, block)
    if len(block_ids) != expected:
        raise TraceError(
            line,
            "hash_ids",
            f"{len(block_ids)} ids for input_length {input_tokens}: "
            f"{block}-token blocks need ceil({input_tokens}/{block}) = {expected}",
        )


def in_arrival_order(rows: Iterable[tuple[int, TraceRecord]], field: str) -> Iterator[TraceRecord]:
    """The records, refusing the first whose arrival is earlier than the one before it
    (equal arrivals are fine: the Mooncake traces start with several at 0 ms)."""
    previous: float | None = None
    for line, record in rows:
        arrival = record.arrival_s
        if arrival is not None and previous is not None and arrival < previous:
            raise TraceError(line, field, f"goes backwards ({arrival:g} s after {previous:g} s)")
        previous = arrival if arrival is not None else previous
        yield record
