"""The planner's TTFT band of a G3 trace replay: the requests the replay step sent at each tier
(checked against what it recorded) through simhost's engine on the engagement's deployment;
without one, each tier says why."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gates.decisions.cells.ttft_bands import parse_g3_ttft_bands
from gates.planner.architectures import preset_model
from gates.planner.replay_band import RESOLUTION, ReplayModel, replay_head, replay_ttft_bands
from runners.traces.readers.formats import read_trace_bytes
from runners.traces.replay_cell import replay_name

TRACE = Path(__file__).parents[2] / "fixtures" / "traces" / "mooncake-synthetic_trace.jsonl"
HEAD = 40  # the fixture's first requests: seconds of the model, not minutes
WORKLOAD = {"seed": 7, "trace": {"sha256": "b" * 64, "format": "mooncake", "block_tokens": 512}}
DEPLOYMENT = ReplayModel(
    model=preset_model("llama-3.1-8b"),
    gpu="H100-SXM5-80GB",
    gpus=1,
    kv_tokens=200_000,
    offload_gib=64.0,
)


def records():
    lines = TRACE.read_bytes().splitlines(keepends=True)[:HEAD]
    return read_trace_bytes(b"".join(lines), "mooncake", 512)


def recorded(workload=WORKLOAD, tiers=(1, 4), **extra):
    sent = {tier: replay_head(records(), workload, tier)[1] for tier in tiers}
    return {replay_name(workload, tier): {"requests": sent[tier], **extra} for tier in tiers}


def test_each_tier_has_a_band_per_arm_in_milliseconds_widened_by_the_resolution():
    one, four = replay_ttft_bands(records, WORKLOAD, [1, 4], DEPLOYMENT, recorded())
    assert (one["tier"], four["tier"]) == (1, 4)
    assert set(one["arms"]) == {"resident", "offload", "recompute"}
    # what the planner puts in the context is what the decision engine reads
    assert parse_g3_ttft_bands({"replay_ttft_predictions": [one, four]}) == [one, four]
    for band in (one, four):
        assert (band["modelled"], band["kept"], band["capped"]) == (HEAD, HEAD, False)
        for low, high in band["arms"].values():
            assert 0 < low < high and high / low >= (1 + RESOLUTION) / (1 - RESOLUTION)
    # more in flight on the same requests: each arm's median waits longer for the batch
    assert one["arms"]["resident"][1] <= four["arms"]["resident"][1]
    assert "all 40 requests" in one["assumes"] and "llama-3.1-8b" in one["assumes"]


def test_each_tier_carries_the_paired_ttft_change_inside_the_independent_extremes():
    one, four = replay_ttft_bands(records, WORKLOAD, [1, 4], DEPLOYMENT, recorded())
    for band in (one, four):
        assert set(band["changes"]) == {"offload/resident", "offload/recompute"}
        (offload_low, offload_high) = band["arms"]["offload"]
        for name, (low, high) in band["changes"].items():
            base_low, base_high = band["arms"][name.split("/")[1]]
            assert offload_low / base_high <= low < high <= offload_high / base_low
            assert high / low >= (1 + RESOLUTION) / (1 - RESOLUTION)


def test_each_tier_carries_every_other_ttft_statistic_s_change_by_clause_metric():
    (band,) = replay_ttft_bands(records, WORKLOAD, [4], DEPLOYMENT, recorded(tiers=(4,)))
    assert set(band["metric_changes"]) == {"ttft_mean", "ttft_p90", "ttft_p99"}
    for changes in band["metric_changes"].values():
        assert set(changes) == {"offload/resident", "offload/recompute"}
        for low, high in changes.values():
            assert 0 < low < high and high / low >= (1 + RESOLUTION) / (1 - RESOLUTION)
    assert parse_g3_ttft_bands({"replay_ttft_predictions": [band]}) == [band]


def test_the_cap_is_recorded_when_the_replay_sends_more(monkeypatch):
    monkeypatch.setattr("gates.planner.replay_band.MAX_REQUESTS", 10)
    (band,) = replay_ttft_bands(records, WORKLOAD, [1], DEPLOYMENT, recorded(tiers=(1,)))
    assert (band["modelled"], band["kept"], band["capped"]) == (10, HEAD, True)
    assert "the first 10 requests of 40 (the model's cap)" in band["assumes"]


def test_a_down_sampled_replay_is_checked_against_its_recorded_sample():
    sampled = {**WORKLOAD, "trace": {**WORKLOAD["trace"], "sample_fraction": 0.5}}
    kept = replay_head(records(), sampled, 1)[1]
    assert 0 < kept < HEAD  # whole prefix trees dropped, not requests
    good = {replay_name(sampled, 1): {"requests": kept, "sample_profile": {"requests": kept}}}
    (band,) = replay_ttft_bands(records, sampled, [1], DEPLOYMENT, good)
    assert band["kept"] == kept and "arms" in band
    unrecorded = {replay_name(sampled, 1): {"requests": kept}}
    (missing,) = replay_ttft_bands(records, sampled, [1], DEPLOYMENT, unrecorded)
    assert "sample was not characterised" in missing["missing"]


@pytest.mark.parametrize(
    ("deployment", "source", "replays", "reason"),
    [
        ("no inventory was accepted at G1", records, recorded(), "no inventory"),
        (DEPLOYMENT, None, recorded(), "no longer holds the trace"),
        (DEPLOYMENT, records, {}, "recorded no replay"),
        (DEPLOYMENT, records, {replay_name(WORKLOAD, 1): {"requests": 3}}, "sent 3 requests"),
    ],
)
def test_without_a_band_each_tier_says_why(deployment, source, replays, reason):
    (band,) = replay_ttft_bands(source, WORKLOAD, [1], deployment, replays)
    assert band["tier"] == 1 and reason in band["missing"], band


def test_a_deployment_the_model_cannot_run_is_refused_with_the_reason():
    unknown_gpu = ReplayModel(DEPLOYMENT.model, "TPU", 1, 200_000, 64.0)
    (band,) = replay_ttft_bands(records, WORKLOAD, [1], unknown_gpu, recorded(tiers=(1,)))
    assert band["missing"].startswith("the model refused the replay") and "gpu" in band["missing"]


def test_the_head_is_read_streaming_and_counts_every_kept_request():
    many = itertools.chain.from_iterable(itertools.repeat(list(records()), 30))
    head, kept = replay_head(many, WORKLOAD, 1)
    assert kept == 30 * HEAD and len(head) == 1000
