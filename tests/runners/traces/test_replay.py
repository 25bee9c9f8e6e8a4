"""The replay every arm sends: byte-identical for a trace and a seed, prefix sharing kept as
equal token prefixes, sessions and prefix trees sampled whole, a warm-up window unmeasured,
arrival times kept and scaled."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from runners.traces.characterize import characterize
from runners.traces.readers.formats import read_trace_file
from runners.traces.records import TraceRecord
from runners.traces.replay import (
    ReplaySettings,
    kept_requests,
    replay_digest,
    replay_file_lines,
    replay_requests,
)
from runners.traces.replay_cell import replay_settings, sample_hit_profile

MOONCAKE = Path(__file__).resolve().parents[2] / "fixtures/traces/mooncake-synthetic_trace.jsonl"
SETTINGS = ReplaySettings(seed=7, block_tokens=4)


def record(at: float, blocks: tuple[int, ...], tokens: int, session: str | None = None):
    return TraceRecord(at, tokens, 3, blocks, session)


TRACE = [
    record(0.0, (1, 2), 7),
    record(0.5, (1, 2, 3), 10),
    record(1.0, (9,), 4),
    record(2.0, (1, 5), 8),
]


def test_every_arm_gets_the_same_bytes():
    arms = [b"".join(replay_file_lines(replay_requests(TRACE, SETTINGS))) for _ in range(3)]
    assert arms[0] == arms[1] == arms[2]
    assert replay_digest(replay_requests(TRACE, SETTINGS)) == replay_digest(
        replay_requests(TRACE, SETTINGS)
    )


def test_another_seed_gives_other_prompts():
    other = ReplaySettings(seed=8, block_tokens=4)
    assert replay_digest(replay_requests(TRACE, SETTINGS)) != replay_digest(
        replay_requests(TRACE, other)
    )


def test_equal_block_keys_give_equal_token_prefixes_and_no_more():
    first, second, third, fourth = (r.prompt_token_ids for r in replay_requests(TRACE, SETTINGS))
    assert [len(p) for p in (first, second, third, fourth)] == [7, 10, 4, 8]
    assert second[:4] == first[:4]  # block 1
    assert second[4:7] == first[4:7]  # block 2, cut to the first request's 3 tokens
    assert fourth[:4] == first[:4] and fourth[4:8] != second[4:8]  # 5 is not 2
    assert third[:4] != first[:4]


def test_arrival_times_are_kept_scaled_and_the_warm_up_is_not_measured():
    settings = ReplaySettings(seed=7, block_tokens=4, time_scale=0.5, warmup_s=1.0)
    requests = list(replay_requests(TRACE, settings))
    assert [r.send_at_s for r in requests] == [0.0, 0.25, 0.5, 1.0]
    assert [r.measured for r in requests] == [False, False, True, True]
    assert [r.output_tokens for r in requests] == [3, 3, 3, 3]


def test_sampling_keeps_or_drops_whole_prefix_trees_and_sessions():
    records = list(read_trace_file(MOONCAKE, "mooncake"))
    settings = ReplaySettings(seed=3, block_tokens=512, sample_fraction=0.25)
    kept = list(replay_requests(records, settings))
    assert 0.1 * len(records) < len(kept) < 0.5 * len(records)
    kept_trees = {r.group for r in kept}
    every_tree = {f"tree:{r.block_ids[0]}" for r in records if r.block_ids}
    for tree in every_tree & kept_trees:  # a kept tree keeps every one of its requests
        wanted = sum(1 for r in records if r.block_ids and f"tree:{r.block_ids[0]}" == tree)
        assert sum(1 for r in kept if r.group == tree) == wanted
    sessions = [record(i, (i,), 4, session=f"s{i % 5}") for i in range(50)]
    kept_sessions = list(replay_requests(sessions, ReplaySettings(7, 4, sample_fraction=0.5)))
    by_session = itertools.groupby(sorted(r.group for r in kept_sessions))
    assert all(len(list(group)) == 10 for _, group in by_session)


def test_the_mooncake_fixture_replays_its_token_counts():
    records = list(itertools.islice(read_trace_file(MOONCAKE, "mooncake"), 50))
    requests = list(replay_requests(records, ReplaySettings(seed=1, block_tokens=512)))
    assert [len(r.prompt_token_ids) for r in requests] == [r.input_tokens for r in records]
    assert all(1000 <= t < 30000 for r in requests for t in r.prompt_token_ids)
    assert requests[-1].send_at_s == (records[-1].arrival_s or 0) - (records[0].arrival_s or 0)


def test_a_load_shape_trace_gives_every_request_its_own_prompt():
    loads = [TraceRecord(float(i), 6, 2, None) for i in range(3)]
    prompts = [r.prompt_token_ids for r in replay_requests(loads, ReplaySettings(1, None))]
    assert len({p[:6] for p in prompts}) == 3 and all(len(p) == 6 for p in prompts)


def test_a_prompt_is_never_longer_than_the_trace_says_when_it_lists_spare_blocks():
    spare = [record(0.0, (1, 2, 3), 5)]
    (request,) = replay_requests(spare, SETTINGS)
    assert len(request.prompt_token_ids) == 5


def test_a_sample_is_characterised_on_its_own_and_presses_the_cache_less_than_the_whole():
    # 20 sessions of 4 blocks each, three turns in round robin: 80 blocks in play at once.
    turns = [
        record(turn * 20 + s, tuple(range(100 * s, 100 * s + 4)), 16)
        for turn in range(3)
        for s in range(20)
    ]
    trace = {"sha256": "a" * 64, "format": "mooncake", "block_tokens": 4}
    whole = sample_hit_profile(turns, {"seed": 1, "trace": trace}, 8)
    assert whole is None  # the stored characterisation is the whole trace's curve
    sampled = {"seed": 1, "trace": {**trace, "sample_fraction": 0.25}}
    sample = sample_hit_profile(turns, sampled, 8)
    kept = len(list(kept_requests(turns, replay_settings(sampled, 8))))
    assert sample is not None and sample["sample_fraction"] == 0.25
    assert sample["requests"] == kept and 0 < kept < len(turns) and kept % 3 == 0
    # Whole sessions are kept, so every later turn still hits with room for them all...
    assert sample["infinite_cache_hit_ratio"] == pytest.approx(2 / 3)
    # ...while 30 blocks of cache hold the sample's sessions but not the whole trace's.
    capacity = 30 * 4
    profile = characterize(turns, block_tokens=4)
    assert hit_at(profile.hit_ratio_curve, capacity) == 0.0
    assert hit_at(sample["hit_ratio_curve"], capacity) == pytest.approx(2 / 3)


def hit_at(curve: list[list[float]], capacity: int) -> float:
    return max((ratio for c, ratio in curve if c <= capacity), default=0.0)
