"""The one-pass Mattson curve equals a naive LRU simulation at every capacity, and the
Fenwick stack gives true LRU stack distances across its compactions."""

from __future__ import annotations

import random
from collections import OrderedDict
from contextlib import contextmanager
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from runners.traces import lru_stack
from runners.traces.lru_simulation import simulated_hit_ratio
from runners.traces.lru_stack import LruStack
from runners.traces.prefix_hits import PrefixHits
from runners.traces.records import TraceRecord

B = 3


@contextmanager
def tiny_slots():
    """Chunks of 2 slots, 2 chunks to start: every few touches compact and grow the stack."""
    with (
        mock.patch.object(lru_stack, "CHUNK_BITS", 1),
        mock.patch.object(lru_stack, "MIN_CHUNKS", 2),
    ):
        yield


def naive_distance(order: OrderedDict[int, None], key: int) -> int | None:
    if key not in order:
        return None
    keys = list(order)  # least recent first
    return len(keys) - 1 - keys.index(key)


@given(st.lists(st.integers(0, 12), max_size=80))
def test_stack_distances_are_lru_positions(keys):
    with tiny_slots():
        stack, order = LruStack(), OrderedDict()
        for key in keys:
            assert stack.distance(key) == naive_distance(order, key)
            stack.touch(key)
            order[key] = None
            order.move_to_end(key)


def test_distances_survive_many_compactions_at_the_real_chunk_size():
    rng = random.Random(7)
    stack, order = LruStack(), OrderedDict()
    for _ in range(3 * (lru_stack.MIN_CHUNKS << lru_stack.CHUNK_BITS)):
        key = rng.randrange(300)
        assert stack.distance(key) == naive_distance(order, key)
        stack.touch(key)
        order[key] = None
        order.move_to_end(key)
    assert len(stack) == len(order)


# Requests share prefixes as real traces do: a few roots, branches, repeated whole requests,
# and raw ids (for the unchained mode) that may repeat inside a request.
block_ids = st.lists(st.integers(0, 6), min_size=0, max_size=7).map(tuple)
requests = st.lists(
    st.tuples(block_ids, st.integers(0, B - 1)),  # ids, tokens missing from the last block
    min_size=1,
    max_size=30,
)


def records_of(drawn) -> list[TraceRecord]:
    return [
        TraceRecord(float(i), max(0, len(ids) * B - (short if ids else 0)), 1, ids)
        for i, (ids, short) in enumerate(drawn)
    ]


@settings(max_examples=300, deadline=None)
@given(requests, st.booleans(), st.integers(0, 5), st.booleans())
def test_the_one_pass_curve_equals_a_naive_simulation_at_every_capacity(
    drawn, chained, warmup, tiny
):
    records = records_of(drawn)
    hits = PrefixHits(B, chained_ids=chained, warmup_requests=warmup)
    with tiny_slots() if tiny else mock.patch.object(lru_stack, "CHUNK_BITS", 8):
        for record in records:
            hits.add(record)
    curve = hits.curve()
    for capacity_blocks in range(0, 45):
        capacity = capacity_blocks * B
        expected = simulated_hit_ratio(records, capacity, B, chained, warmup)
        assert curve.at(capacity) == expected, capacity_blocks
    infinite = simulated_hit_ratio(records, 10**9, B, chained, warmup)
    assert curve.ceiling() == infinite
