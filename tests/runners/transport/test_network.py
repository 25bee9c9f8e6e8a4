"""The connection retry schedule, on a fake clock: no network, no sleeping."""

from __future__ import annotations

import pytest

from runners.errors import InfrastructureError
from runners.transport.network import with_backoff


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def failing(times: int, *, permanent: bool = False):
    calls = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise InfrastructureError("refused", permanent=permanent)
        return "connected"

    return attempt, calls


def test_transient_failures_are_retried_with_doubling_delays():
    clock = Clock()
    attempt, calls = failing(3)
    result = with_backoff(attempt, attempts=5, budget_s=60, clock=clock, sleep=clock.sleep)
    assert result == "connected" and len(calls) == 4
    assert clock.slept == [0.5, 1.0, 2.0]


def test_a_permanent_failure_is_not_retried():
    clock = Clock()
    attempt, calls = failing(1, permanent=True)
    with pytest.raises(InfrastructureError):
        with_backoff(attempt, attempts=5, budget_s=60, clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and not clock.slept


def test_the_last_attempt_raises_its_own_error():
    clock = Clock()
    attempt, calls = failing(10)
    with pytest.raises(InfrastructureError):
        with_backoff(attempt, attempts=3, budget_s=60, clock=clock, sleep=clock.sleep)
    assert len(calls) == 3 and clock.slept == [0.5, 1.0]


def test_no_attempt_starts_after_the_budget():
    clock = Clock()
    attempt, calls = failing(10)
    with pytest.raises(InfrastructureError):
        with_backoff(attempt, attempts=10, budget_s=2.0, clock=clock, sleep=clock.sleep)
    # 0.5 s, then 1 s (1.5 s spent); a 2 s wait would start the next attempt at 3.5 s.
    assert len(calls) == 3 and clock.now == 1.5


def test_delays_stop_growing_at_four_seconds():
    clock = Clock()
    attempt, _ = failing(6)
    with_backoff(attempt, attempts=7, budget_s=600, clock=clock, sleep=clock.sleep)
    assert clock.slept == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
