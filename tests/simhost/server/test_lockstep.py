"""The virtual clock's lockstep with a closed-loop client, and the run's seeded speed."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost.bench.run import _promises
from simhost.server.args import UsageError, run_speed
from simhost.server.lockstep import Lockstep, parse_promise


def test_a_closed_loop_promises_its_burst_and_its_total():
    values = _promises(10, 4)
    promises = [parse_promise(v) for v in values]
    assert {p.run for p in promises} == {promises[0].run}
    assert {(p.burst, p.total) for p in promises} == {(4, 10)}
    assert _promises(3, None) == [None] * 3


def test_the_clock_holds_until_every_promised_request_came():
    lockstep = Lockstep()
    promise = parse_promise(_promises(6, 3)[0])
    lockstep.arrived(promise)
    assert lockstep.owed() == 2  # two more of the burst are on their way
    lockstep.arrived(promise)
    lockstep.arrived(promise)
    assert not lockstep.waiting()
    lockstep.finished(promise)  # the loop sends the next one
    assert lockstep.waiting()
    lockstep.arrived(promise)
    assert not lockstep.waiting()


@given(st.randoms(use_true_random=False), st.integers(1, 6), st.integers(1, 20))
def test_a_closed_loop_never_leaves_the_clock_waiting_for_a_request_it_will_not_send(
    rng, burst, total
):
    """Whichever request ends first, the loop's next send is what the server waits for: it
    waits exactly while the loop has fewer in flight than it keeps, and never after the end."""
    lockstep, promise = Lockstep(), parse_promise(_promises(total, burst)[0])
    in_flight, sent = [], 0
    while sent < total or in_flight:
        while sent < total and len(in_flight) < burst:
            assert lockstep.waiting() or sent == 0  # the first arrival opens the run
            lockstep.arrived(promise)
            in_flight.append(sent)
            sent += 1
        assert not lockstep.waiting()
        in_flight.remove(rng.choice(in_flight))
        lockstep.finished(promise)
    assert not lockstep.waiting() and lockstep.owed() == 0


def test_a_new_run_starts_its_own_count_and_a_lost_request_is_given_up():
    lockstep = Lockstep()
    lockstep.arrived(parse_promise("a 4 8"))
    lockstep.give_up()
    assert not lockstep.waiting()
    lockstep.arrived(parse_promise("b 2 5"))
    assert lockstep.waiting()
    lockstep.finished(parse_promise("a 4 8"))  # an old run's end changes nothing
    assert lockstep.owed() == 1


@pytest.mark.parametrize("value", [None, "", "x", "run 2", "run two 1", "run 0 7", "run 2 0"])
def test_a_malformed_promise_is_ignored(value):
    assert parse_promise(value) is None


def test_the_run_speed_has_the_stated_spread_and_repeats_by_seed():
    speeds = [run_speed(0.04, seed) for seed in range(4000)]
    assert statistics.mean(speeds) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(speeds) == pytest.approx(0.04, rel=0.1)
    assert run_speed(0.04, 7) == run_speed(0.04, 7)
    assert run_speed(0.0, None) == 1.0
    with pytest.raises(UsageError):
        run_speed(1.5, 1)
