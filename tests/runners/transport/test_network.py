"""The retry rule: a connection's schedule on a fake clock, and the outage window a run (or a
soak collector) rides out. No network, no sleeping."""

from __future__ import annotations

import pytest

from runners.errors import BenchmarkError, InfrastructureError, SpecError
from runners.transport.network import (
    STEP_AUTH,
    backoff_delay,
    is_transient,
    outage_retry_after,
    with_backoff,
)


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


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (InfrastructureError("connection refused", step="tcp connect"), True),
        (InfrastructureError("connection reset by peer", step="ssh handshake"), True),
        (InfrastructureError("timed out"), True),
        (InfrastructureError("authentication refused", permanent=True, step=STEP_AUTH), True),
        (InfrastructureError("host key changed", permanent=True, step="host key check"), False),
        (InfrastructureError("host key not pinned", permanent=True, step="host key check"), False),
        (InfrastructureError("no common algorithms", permanent=True, step="ssh handshake"), False),
        (InfrastructureError("port 8000 is already in use by pid 7", permanent=True), False),
        (SpecError("bad", field="run_root"), False),
        (BenchmarkError("bench exited 1"), False),
        (ValueError("a bug"), False),
    ],
)
def test_only_errors_that_may_heal_are_transient(error, transient):
    assert is_transient(error) is transient


def test_outage_retries_back_off_and_stop_at_the_window():
    refused = InfrastructureError("connection refused")
    clock, retries, delays = 0.0, 0, []
    while True:
        retries += 1
        delay = outage_retry_after(refused, outage_s=clock, retries=retries, window_s=60)
        if delay is None:
            break
        delays.append(delay)
        clock += delay + 1.5  # each try itself takes a moment (a refused connect)
    assert delays[:5] == [1.0, 2.0, 4.0, 8.0, 15.0] and max(delays) == 15.0
    assert 60 <= clock < 60 + 15 + 1.5  # gave up at the first try after the window


def test_the_last_retry_is_scheduled_inside_the_window():
    refused = InfrastructureError("connection refused")
    assert outage_retry_after(refused, outage_s=59.5, retries=9, window_s=60) == 0.5
    assert outage_retry_after(refused, outage_s=60.0, retries=10, window_s=60) is None


def test_a_host_key_change_is_never_retried_even_inside_the_window():
    changed = InfrastructureError("host key changed", permanent=True, step="host key check")
    assert outage_retry_after(changed, outage_s=0, retries=1, window_s=600) is None


def test_a_zero_window_fails_at_the_first_error():
    refused = InfrastructureError("connection refused")
    assert outage_retry_after(refused, outage_s=0, retries=1, window_s=0) is None


def test_the_connection_schedule_and_the_outage_schedule_share_one_backoff():
    assert [backoff_delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert [backoff_delay(n, first_s=1, max_s=15) for n in (1, 4, 5, 9)] == [1, 8, 15, 15]
