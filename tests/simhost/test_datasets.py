from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost.datasets import DatasetSpec, build_workload


def test_the_same_seed_gives_the_same_prompts_and_another_seed_does_not():
    spec = DatasetSpec(name="random", num_prompts=5, seed=3, random_input_len=50)
    assert build_workload(spec) == build_workload(spec)
    other = DatasetSpec(name="random", num_prompts=5, seed=4, random_input_len=50)
    assert build_workload(other).measured != build_workload(spec).measured


def test_random_prompts_have_the_asked_lengths_after_the_shared_prefix():
    spec = DatasetSpec(name="random", num_prompts=6, random_input_len=40, random_prefix_len=10)
    prompts = build_workload(spec).measured
    assert all(p.prompt_len == 50 == len(p.prompt.split()) for p in prompts)
    assert len({" ".join(p.prompt.split()[:10]) for p in prompts}) == 1
    assert all(p.output_len == 128 for p in prompts)


@given(st.integers(1, 500), st.floats(0, 0.9))
def test_the_range_ratio_keeps_lengths_inside_the_band(length, ratio):
    spec = DatasetSpec(
        name="random", num_prompts=20, random_input_len=length, random_range_ratio=ratio
    )
    for prompt in build_workload(spec).measured:
        assert (
            max(1, int(length * (1 - ratio)))
            <= prompt.prompt_len
            <= max(1, int(length * (1 + ratio)))
        )


def test_prefix_repetition_spreads_prompts_evenly_over_the_prefixes():
    spec = DatasetSpec(
        name="prefix_repetition", num_prompts=12, num_prefixes=3, prefix_len=20, suffix_len=5
    )
    prompts = build_workload(spec).measured
    prefixes = Counter(" ".join(p.prompt.split()[:20]) for p in prompts)
    assert sorted(prefixes.values()) == [4, 4, 4]
    assert len({p.prompt for p in prompts}) == 12


def test_cold_recovery_seeds_the_timed_prompts_flushes_then_sends_them_again():
    # docs/gates.md: the one definition the vllm profile's three bench runs also follow.
    spec = DatasetSpec(
        name="cold_recovery",
        num_prompts=8,
        num_prefixes=4,
        prefix_len=30,
        suffix_len=10,
        flush_tokens=200,
    )
    workload = build_workload(spec)
    assert [p.prompt for p in workload.warmup] == [p.prompt for p in workload.measured]
    assert all(p.output_len == 1 for p in workload.warmup)
    assert len(workload.flush) == 5  # ceil(200 / 40)
    sessions = {" ".join(p.prompt.split()[:30]) for p in workload.measured}
    assert len(sessions) == 4
    assert not sessions & {" ".join(p.prompt.split()[:30]) for p in workload.flush}


def test_an_unknown_dataset_is_refused_with_the_flag_named():
    with pytest.raises(ValueError, match="--dataset-name"):
        build_workload(DatasetSpec(name="sharegpt", num_prompts=1))
