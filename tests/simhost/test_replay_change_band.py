"""The replay's predicted TTFT change (offload p50 / baseline p50) from runs paired by seed and
clock: a known effect gives a band around it, and pairing never widens the band past the one the
extremes of two independent bands give."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from simhost.engine.presets import SMALL_1B
from simhost.engine.replay_predict import (
    CLOCKS_FROM_STEP_START,
    JITTER_SEEDS,
    LINK_EFFICIENCIES,
    ArmBand,
    independent_change_band,
    paired_change_band,
    predict_replay_ttft,
)
from tests.simhost.test_replay_predict import BLOCK, SMALL_CACHE, burst, session_replay


def seeded_runs(effect: float, spread: float, link_share: float, seed: int) -> tuple[dict, dict]:
    """A baseline arm whose runs move by up to `spread` between seeds and clocks (what a late
    send or the clock does to both arms alike), and an offload arm `effect` times each of them,
    `link_share` slower at half the links' speed and as much faster at full speed."""
    draw = random.Random(seed)
    base = {
        (1.0, s, clock): 0.100 * (1 + draw.uniform(-spread, spread))
        for s in JITTER_SEEDS
        for clock in CLOCKS_FROM_STEP_START
    }
    links = dict(zip(LINK_EFFICIENCIES, (1 + link_share, 1 - link_share), strict=True))
    over = {
        (efficiency, s, clock): p50 * effect * links[efficiency]
        for efficiency in LINK_EFFICIENCIES
        for (_, s, clock), p50 in base.items()
    }
    return over, base


def as_band(runs: dict) -> ArmBand:
    return ArmBand(min(runs.values()), max(runs.values()), len(runs))


@pytest.mark.parametrize("seed", range(50))
def test_a_known_effect_gives_a_band_around_it_narrower_than_independent_extremes(seed):
    over, base = seeded_runs(effect=0.7, spread=0.2, link_share=0.01, seed=seed)
    band = paired_change_band(over, base)
    low, high = independent_change_band(as_band(over), as_band(base))
    assert band.runs == len(over) == 8
    assert band.low == pytest.approx(0.7 * 0.99) and band.high == pytest.approx(0.7 * 1.01)
    assert low <= band.low <= 0.7 <= band.high <= high
    # the arms' shared swing (up to 20 % a run) cancels in the pairs; the extremes keep it
    assert (high - low) > 3 * (band.high - band.low)


def test_runs_pair_by_seed_and_clock_never_by_rank():
    """The offload arm's fastest run is not divided by the baseline's slowest: each ratio is of
    one seed's and clock's two runs."""
    base = {(1.0, 1, False): 0.10, (1.0, 1, True): 0.20}
    over = {(1.0, 1, False): 0.05, (1.0, 1, True): 0.10}
    band = paired_change_band(over, base)
    assert (band.low, band.high) == (0.5, 0.5)
    assert independent_change_band(as_band(over), as_band(base)) == (0.25, 1.0)


def test_runs_with_nothing_to_pair_are_refused():
    with pytest.raises(ValueError, match="pair"):
        paired_change_band({(1.0, 1, False): 0.1}, {(1.0, 2, False): 0.1})


def test_the_engine_s_change_is_paired_within_the_independent_band():
    """On the engine: resumed prefixes that were evicted load faster from the offload tier than
    they re-prefill, so offload / resident is under 1; the paired band sits inside the one from
    the two arms' extremes."""
    prediction = predict_replay_ttft(
        SMALL_CACHE, session_replay(), 2, trace_block_tokens=BLOCK, offload_gib=4.0
    )
    for name, (over, base) in {
        "offload/resident": ("offload", "resident"),
        "offload/recompute": ("offload", "recompute"),
    }.items():
        change = prediction.changes[name]
        low, high = independent_change_band(prediction.arms[over], prediction.arms[base])
        assert change.runs == 8
        assert low <= change.low <= change.high <= high
    assert prediction.changes["offload/recompute"].high < 1


def test_requests_of_their_own_give_one_change_whatever_the_seed_or_clock():
    """Nothing shared and nothing queued: every paired run gives the offload arm's own cost over
    the resident arm's (the connector's lookups), so the paired band has no width."""
    requests = [replace(request, send_at_s=i * 0.5) for i, request in enumerate(burst(8))]
    prediction = predict_replay_ttft(
        SMALL_1B, requests, 2, trace_block_tokens=BLOCK, offload_gib=1.0
    )
    change = prediction.changes["offload/resident"]
    assert change.high - change.low < 1e-9
    assert 0.95 < change.low < 1.05
