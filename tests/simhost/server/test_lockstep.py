"""The virtual clock's lockstep with a closed-loop client, and the run's seeded speed."""

from __future__ import annotations

import statistics

import pytest

from simhost.bench.run import _promises
from simhost.server.args import UsageError, run_speed
from simhost.server.lockstep import Lockstep, parse_promise


def test_a_closed_loop_promises_one_follower_per_request_beyond_its_burst():
    values = _promises(10, 4)
    promises = [parse_promise(v) for v in values]
    assert {p.run for p in promises} == {promises[0].run}
    assert all(p.burst == 4 for p in promises)
    assert [p.follows for p in promises] == [True] * 6 + [False] * 4
    assert _promises(3, None) == [None] * 3


def test_the_clock_holds_until_every_promised_request_came():
    lockstep = Lockstep()
    promises = [parse_promise(v) for v in _promises(6, 3)]
    lockstep.arrived(promises[0])
    assert lockstep.waiting()  # two more of the burst are on their way
    lockstep.arrived(promises[1])
    lockstep.arrived(promises[2])
    assert not lockstep.waiting()
    lockstep.finished(promises[0])  # its follower is promised
    assert lockstep.waiting()
    lockstep.arrived(promises[3])
    assert not lockstep.waiting()
    lockstep.finished(promises[5])  # the last ones promise nothing
    assert not lockstep.waiting()


def test_a_new_run_starts_its_own_count_and_a_lost_request_is_given_up():
    lockstep = Lockstep()
    lockstep.arrived(parse_promise("a 4 1"))
    lockstep.give_up()
    assert not lockstep.waiting()
    lockstep.arrived(parse_promise("b 2 0"))
    assert lockstep.waiting()


@pytest.mark.parametrize("value", [None, "", "x", "run 2", "run two 1", "run 2 7"])
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
