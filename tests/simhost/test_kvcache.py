from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simhost.engine.kvcache import CpuTier, GpuBlockPool, blocks_for


def test_it_evicts_the_least_recently_freed_cached_block_first():
    pool = GpuBlockPool(num_blocks=3, caching=True)
    assert pool.allocate(3)
    for block_hash in (1, 2, 3):
        pool.register(block_hash)
    pool.release([1])
    pool.release([2])
    pool.release([3])
    assert pool.allocate(1)
    assert not pool.contains(1)
    assert pool.contains(2) and pool.contains(3)
    assert pool.evictions == 1


def test_it_frees_a_prompts_tail_before_its_head():
    pool = GpuBlockPool(num_blocks=3, caching=True)
    pool.allocate(3)
    for block_hash in (10, 11, 12):
        pool.register(block_hash)
    pool.release([10, 11, 12])
    pool.allocate(1)
    assert pool.count_hits([10, 11, 12], 3) == 2


def test_a_shared_block_stays_in_use_until_its_last_user_frees_it():
    pool = GpuBlockPool(num_blocks=2, caching=True)
    pool.allocate(1)
    pool.register(7)
    pool.share(7)
    pool.release([7])
    assert pool.in_use == 1
    pool.release([7])
    assert pool.in_use == 0
    assert pool.cached_in_lru(7)


def test_it_refuses_an_allocation_larger_than_the_free_blocks():
    pool = GpuBlockPool(num_blocks=4, caching=True)
    assert pool.allocate(3)
    assert not pool.allocate(2)
    assert pool.in_use == 3


def test_without_prefix_caching_nothing_is_ever_hit():
    pool = GpuBlockPool(num_blocks=4, caching=False)
    pool.allocate(1)
    assert not pool.register(5)
    pool.release([None])
    assert pool.count_hits([5], 1) == 0


def test_the_cpu_tier_keeps_only_its_capacity_in_lru_order():
    tier = CpuTier(capacity_blocks=2)
    assert tier.store(1) and tier.store(2)
    assert not tier.store(1)  # already there: touched, no bytes moved
    tier.store(3)
    assert tier.count_hits([1, 3], 0, 2) == 2
    assert tier.count_hits([2], 0, 1) == 0


def test_tier_hits_stop_at_the_first_missing_block():
    tier = CpuTier(capacity_blocks=8)
    for block_hash in (1, 2, 4):
        tier.store(block_hash)
    assert tier.count_hits([9, 1, 2, 3, 4], 1, 5) == 2


def test_blocks_for_rounds_up():
    assert blocks_for(0, 16) == 0
    assert blocks_for(1, 16) == 1
    assert blocks_for(16, 16) == 1
    assert blocks_for(17, 16) == 2


operations = st.lists(
    st.tuples(st.sampled_from(["alloc", "release", "share"]), st.integers(1, 6)), max_size=60
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_blocks_are_never_lost_or_double_counted(ops):
    pool = GpuBlockPool(num_blocks=12, caching=True)
    held: list = []
    next_hash = 100
    for op, count in ops:
        if op == "alloc" and pool.allocate(count):
            for _ in range(count):
                next_hash += 1
                held.append(next_hash if pool.register(next_hash) else None)
        elif op == "share":
            cached = [h for h in held if h is not None][:count]
            for block_hash in cached:
                pool.share(block_hash)
                held.append(block_hash)
        elif op == "release" and held:
            pool.release(held[-count:])
            del held[-count:]
        assert pool.in_use + pool.free_capacity() == pool.num_blocks
        assert pool.in_use == len(set(held)) + held.count(None) - (None in held)
