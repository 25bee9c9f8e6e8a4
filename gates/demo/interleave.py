"""Walks several demo engagements side by side: each engagement's walk is a generator that
yields while it waits (for a run, a prediction, a delivery) and returns its steps. Pure
scheduling: no Django, no I/O; the clock's sleep is injected."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import TypeVar

Result = TypeVar("Result")
# A walk yields None each time it is waiting and returns its result when it is done.
Walk = Generator[None, None, Result]


def interleave(
    walks: Sequence[Walk[Result]],
    *,
    sleep: Callable[[float], None],
    poll_s: float,
    width: int | None = None,
) -> list[Result]:
    """Every walk's result, in the walks' order. Up to `width` walks (all when None) advance
    together: each round moves every active walk on to its next wait, so an engagement's steps
    keep their order while the engagements' waits overlap and the wall time is about the
    longest walk's, not the sum. `width=1` walks them one after another."""
    results: dict[int, Result] = {}
    queued = deque(range(len(walks)))
    limit = len(walks) if width is None else max(1, width)
    active: list[int] = []
    while queued or active:
        still_waiting: list[int] = []
        # A walk that ends this round hands its place to the next queued one at once.
        while active or (queued and len(still_waiting) < limit):
            index = active.pop(0) if active else queued.popleft()
            finished, result = _advance(walks[index])
            if finished:
                results[index] = result  # type: ignore[assignment]
            else:
                still_waiting.append(index)
        active = still_waiting
        if active:
            sleep(poll_s)  # every active walk waits on something outside this process
    return [results[index] for index in range(len(walks))]


def _advance(walk: Walk[Result]) -> tuple[bool, Result | None]:
    """Run the walk to its next wait: (False, None) while it waits, (True, result) at its end."""
    try:
        next(walk)
    except StopIteration as stop:
        return True, stop.value
    return False, None
