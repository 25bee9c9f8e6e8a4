"""The demo's side-by-side walk (gates/demo/interleave.py) on fake engagements: steps that wait
a number of polls, a fake clock that counts the sleeps."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from gates.demo.interleave import interleave


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def fake_walk(name: str, waits: list[int], log: list[tuple[str, int, str]]) -> Generator:
    """An engagement whose step i waits waits[i] polls (a run that takes a while); it logs each
    step's start and end, and returns the steps it finished."""
    done = []
    for step, polls in enumerate(waits):
        log.append((name, step, "start"))
        for _ in range(polls):
            yield
        log.append((name, step, "end"))
        done.append(f"{name}{step}")
    return done


def walk_all(plans: dict[str, list[int]], width: int | None = None):
    log: list[tuple[str, int, str]] = []
    clock = FakeClock()
    walks = [fake_walk(name, waits, log) for name, waits in plans.items()]
    results = interleave(walks, sleep=clock.sleep, poll_s=1.0, width=width)
    return results, log, clock.now


PLANS = {"a": [3, 1, 4], "b": [2, 2], "c": [5, 0, 1, 1]}


def test_it_returns_each_walks_result_in_the_walks_order() -> None:
    results, _, _ = walk_all(PLANS)
    assert results == [["a0", "a1", "a2"], ["b0", "b1"], ["c0", "c1", "c2", "c3"]]


@pytest.mark.parametrize("width", [None, 1, 2])
def test_each_engagements_steps_keep_their_order(width) -> None:
    _, log, _ = walk_all(PLANS, width)
    for name, waits in PLANS.items():
        own = [(step, event) for who, step, event in log if who == name]
        assert own == [(step, event) for step in range(len(waits)) for event in ("start", "end")]


def test_every_engagement_starts_before_any_finishes_its_first_step() -> None:
    _, log, _ = walk_all(PLANS)
    first_end = next(i for i, (_, _, event) in enumerate(log) if event == "end")
    assert {name for name, step, event in log[:first_end] if event == "start"} == set(PLANS)


def test_the_wall_time_is_the_longest_engagement_not_the_sum() -> None:
    _, _, side_by_side = walk_all(PLANS)
    _, _, one_at_a_time = walk_all(PLANS, width=1)
    longest = max(sum(waits) for waits in PLANS.values())
    assert side_by_side == longest
    assert one_at_a_time == sum(sum(waits) for waits in PLANS.values())


def test_width_one_finishes_each_engagement_before_starting_the_next() -> None:
    _, log, _ = walk_all(PLANS, width=1)
    assert [name for name, _, _ in log] == sorted(name for name, _, _ in log)


def test_a_width_of_two_keeps_two_engagements_moving_and_starts_the_third_when_one_ends() -> None:
    _, log, now = walk_all({"a": [2], "b": [6], "c": [3]}, width=2)
    c_start = log.index(("c", 0, "start"))
    assert log.index(("a", 0, "end")) < c_start < log.index(("b", 0, "end"))
    assert now == 6  # c ran beside b, in the place a left


def test_walks_that_never_wait_need_no_sleep() -> None:
    results, _, now = walk_all({"a": [0, 0], "b": [0]})
    assert results == [["a0", "a1"], ["b0"]] and now == 0
