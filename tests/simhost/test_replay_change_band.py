"""The replay's predicted TTFT change (offload statistic / baseline statistic) from runs paired by
seed and clock: a known effect gives a band around it, pairing never widens the band past the one
the extremes of two independent bands give, and one set of runs gives every statistic."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from simhost.engine import replay_predict
from simhost.engine.presets import SMALL_1B
from simhost.engine.replay_predict import (
    CLOCKS_FROM_STEP_START,
    JITTER_SEEDS,
    LINK_EFFICIENCIES,
    STATISTICS,
    ArmBand,
    ReplayedRequest,
    independent_change_band,
    paired_change_band,
    predict_replay_ttft,
    ttft_statistics,
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


@pytest.mark.parametrize("count", [1, 2, 3, 7, 99, 100, 101, 1000])
def test_the_model_reads_each_statistic_as_the_measured_replay_does(count):
    """Nearest rank (numpy's inverted_cdf, the replay-records adapter's reading of a measured
    replay) for each percentile, the plain mean for the mean."""
    values = [random.Random(count).lognormvariate(-1, 1) for _ in range(count)]
    statistics = ttft_statistics(values)
    assert set(statistics) == set(STATISTICS) == {"p50", "p90", "p99", "mean"}
    for name, rank in STATISTICS.items():
        expected = (
            np.mean(values) if rank is None else np.percentile(values, rank, method="inverted_cdf")
        )
        assert statistics[name] == pytest.approx(float(expected), rel=1e-12), name


def tail_replay(fresh: int = 60) -> list:
    """The session replay's prefixes (unmeasured), then `fresh` short requests of their own
    (measured, one every half second: no queue), then each session resumed (measured): the
    resumes are the slowest requests, so they set the p99 and not the p50."""
    sessions = session_replay()
    first, resumes = sessions[:6], sessions[6:]
    start = 6 * 0.5
    short = [
        ReplayedRequest(start + i * 0.5, BLOCK, (50_000 + i,), 8, measured=True)
        for i in range(fresh)
    ]
    later = start + fresh * 0.5
    resumed = [replace(request, send_at_s=later + i * 0.5) for i, request in enumerate(resumes)]
    return first + short + resumed


def test_a_tail_effect_moves_the_p99_change_and_not_the_p50_change():
    """The offload tier shortens only the resumed sessions' prefill: the slowest few requests.
    The p50 change stays at the connector's own cost on the short requests (a few % slower)
    while the p99 change, read from the same runs, falls to a fraction (evicted prefixes loaded
    instead of prefilled again)."""
    prediction = predict_replay_ttft(
        SMALL_CACHE, tail_replay(), 2, trace_block_tokens=BLOCK, offload_gib=4.0
    )
    p50 = prediction.statistic_changes["p50"]["offload/resident"]
    p99 = prediction.statistic_changes["p99"]["offload/resident"]
    assert prediction.changes == prediction.statistic_changes["p50"]
    assert 1.0 < p50.low <= p50.high < 1.1
    assert p99.high < 0.5
    assert p99.runs == p50.runs == 8
    assert set(prediction.statistic_changes) == set(STATISTICS)


def test_every_statistic_comes_from_one_set_of_runs(monkeypatch):
    """As many engine runs as the p50 alone took: 4 for each baseline arm, 8 for offload."""
    calls = []
    real = replay_predict.replay_ttfts

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(replay_predict, "replay_ttfts", counted)
    prediction = predict_replay_ttft(
        SMALL_1B, burst(4), 2, trace_block_tokens=BLOCK, offload_gib=1.0
    )
    assert len(calls) == sum(band.runs for band in prediction.arms.values()) == 16
