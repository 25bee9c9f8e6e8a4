"""The one-pass characterisation: known answers on tiny traces, the real Mooncake trace's
figures against the research note's independent numbers, and the arrival and session figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.traces.characterize import characterize
from runners.traces.readers.formats import read_trace_file
from runners.traces.records import LOAD_SHAPE_ONLY, TraceRecord

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
MOONCAKE = FIXTURES / "mooncake-synthetic_trace.jsonl"
EXPECTED = json.loads((FIXTURES / "mooncake-synthetic_trace.expected.json").read_text())
B = 4  # tokens per block in the tiny traces


def request(ids: tuple[int, ...], at: float = 0.0, tokens: int | None = None) -> TraceRecord:
    return TraceRecord(at, len(ids) * B if tokens is None else tokens, 1, ids)


def profile(*records: TraceRecord, **options):
    return characterize(records, block_tokens=B, **options)


def test_two_identical_requests_of_four_blocks_have_a_ceiling_of_half():
    result = profile(request((1, 2, 3, 4)), request((1, 2, 3, 4)))
    assert result.infinite_cache_hit_ratio == 0.5
    assert (result.requests, result.block_accesses, result.distinct_blocks) == (2, 8, 4)


def test_lru_needs_room_for_the_whole_prefix():
    result = profile(
        request((1, 2, 3, 4)), request((1, 2, 3, 4)), capacities_tokens=[B * c for c in range(6)]
    )
    # Capacity 2 blocks holds the request's head (blocks 1, 2): the second request hits 2 of 4.
    assert result.hit_ratio_at == {0: 0.0, 4: 1 / 8, 8: 2 / 8, 12: 3 / 8, 16: 0.5, 20: 0.5}


def test_a_block_after_a_miss_never_hits_even_if_it_was_seen():
    # Not chained on purpose (raw ids): block 2 was seen, but block 9 before it misses.
    result = profile(request((1, 2)), request((9, 2)), request((1, 5)))
    assert result.infinite_cache_hit_ratio == pytest.approx(1 / 6)


def test_the_last_block_weighs_only_its_tokens():
    result = profile(request((1, 2), tokens=5), request((1, 2), tokens=5))
    assert result.infinite_cache_hit_ratio == 0.5
    result = profile(request((1, 2), tokens=5), request((1, 3), tokens=5))
    assert result.infinite_cache_hit_ratio == pytest.approx(4 / 10)


def test_unchained_ids_are_keyed_by_their_prefix():
    # Bailian-style: the same id after a different parent is a different block.
    records = [request((1, 2)), request((3, 2))]
    assert profile(*records, chained_ids=False).infinite_cache_hit_ratio == 0.0
    assert profile(*records, chained_ids=True).infinite_cache_hit_ratio == 0.0  # 3 misses first
    records = [request((1, 2)), request((1, 2))]
    assert profile(*records, chained_ids=False).infinite_cache_hit_ratio == 0.5


def test_a_warm_up_fills_the_cache_but_is_not_measured():
    result = profile(request((1, 2)), request((1, 2)), warmup_requests=1)
    assert result.infinite_cache_hit_ratio == 1.0 and result.measured_from_request == 1


def test_reuse_distance_in_blocks_and_seconds():
    result = profile(request((1,), at=0), request((2,), at=1), request((1,), at=4))
    blocks, seconds = result.reuse_distance["blocks"], result.reuse_distance["seconds"]
    assert (blocks["count"], blocks["p50"]) == (1, 1)  # one other block came between
    assert seconds["p50"] == pytest.approx(4, rel=0.01)


def test_arrivals_give_rate_peaks_and_a_zero_cv_for_even_gaps():
    result = profile(*(request((i,), at=i * 0.5) for i in range(21)))
    arrivals = result.arrivals
    assert arrivals["duration_s"] == 10 and arrivals["mean_rate_per_s"] == 2
    assert arrivals["interarrival_cv"] == 0
    assert (arrivals["peak_per_1s"], arrivals["peak_per_10s"]) == (2, 20)
    assert arrivals["per_minute"] == [21]


def test_bursty_arrivals_have_a_cv_above_one():
    times = [0, 0.01, 0.02, 10, 10.01, 10.02, 20, 20.01, 20.02]
    assert (
        profile(*(request((i,), at=t) for i, t in enumerate(times))).arrivals["interarrival_cv"] > 1
    )


def test_sessions_count_turns_where_the_trace_names_them():
    records = [TraceRecord(0, B, 1, (1,), "a", 1), TraceRecord(1, B, 1, (1,), "a", 2)]
    records.append(TraceRecord(2, B, 1, (2,), "b", 1))
    sessions = profile(*records).sessions
    assert sessions["sessions"] == 2 and sessions["multi_turn_request_share"] == pytest.approx(
        2 / 3
    )
    assert profile(request((1,))).sessions is None


def test_a_load_shape_trace_has_no_hit_figures_and_says_so():
    records = [TraceRecord(0.0, 10, 2, None), TraceRecord(1.0, 30, 4, None)]
    data = characterize(records, block_tokens=None).to_dict()
    assert data["infinite_cache_hit_ratio"] is None and data["hit_ratio_at"] == {}
    assert data["notice"] == LOAD_SHAPE_ONLY and data["prefix_information"] is False
    assert data["input_length"]["p50"] == 10 and data["requests"] == 2


def test_length_percentiles_are_nearest_rank():
    records = [request((i,), tokens=t) for i, t in enumerate(range(1, 101))]
    lengths = profile(*records).input_length
    assert (lengths["p50"], lengths["p90"], lengths["p99"], lengths["max"]) == (50, 90, 99, 100)


def mooncake(**options):
    return characterize(read_trace_file(MOONCAKE, "mooncake"), block_tokens=512, **options)


def test_the_mooncake_synthetic_trace_has_its_published_counts_and_ceiling():
    result = mooncake()
    assert (result.requests, result.block_accesses) == (
        EXPECTED["requests"],
        EXPECTED["block_accesses"],
    )
    expected = EXPECTED["all_requests"]["infinite_cache_hit_ratio"]
    assert result.infinite_cache_hit_ratio == pytest.approx(expected, abs=0.0005)
    assert result.input_length["mean"] == pytest.approx(15_325, abs=1)  # the Mooncake README's mean
    assert result.reuse_distance["seconds"]["p50"] == pytest.approx(
        EXPECTED["reuse_gap_median_s"], abs=1
    )


def test_the_mooncake_curve_over_the_last_half_matches_the_independent_numbers():
    expected = EXPECTED["last_half"]
    capacities = [int(c) for c in expected["hit_ratio_at"]]
    result = mooncake(warmup_requests=EXPECTED["requests"] // 2, capacities_tokens=capacities)
    assert result.infinite_cache_hit_ratio == pytest.approx(
        expected["infinite_cache_hit_ratio"], abs=0.0005
    )
    for capacity, ratio in expected["hit_ratio_at"].items():
        assert result.hit_ratio_at[int(capacity)] == pytest.approx(ratio, abs=0.0005), capacity


def test_the_curve_rises_to_the_ceiling():
    result = mooncake()
    ratios = [ratio for _, ratio in result.hit_ratio_curve]
    assert ratios == sorted(ratios) and ratios[-1] == result.infinite_cache_hit_ratio
