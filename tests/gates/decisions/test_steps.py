"""The within-repetition step check (statistics.outliers.step_level): a bench's CUSUM over the
median of its arm and tier's benches, its limit simulated on closed-loop benches, seeded; a
flagged repetition is set aside, re-run and shown."""

from __future__ import annotations

import math

import numpy as np

from gates.decisions import decide_g3
from gates.decisions.statistics.inference import SequentialPlan
from gates.decisions.statistics.spread import sd_from_cv
from gates.decisions.statistics.steps import (
    MIN_REPETITIONS,
    closed_loop_ttfts,
    cusum_statistic,
    find_steps,
    null_statistics,
    relative_statistics,
    step_checks,
    step_limit,
    stepped_gates,
)
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, paired

LEVEL = 0.01
BENCHES = 9  # the template's 3 arms x 3 tiers in one repetition
TAIL = LEVEL / BENCHES
REQUESTS = 64  # the template's num_prompts
GROUP = 8  # the template's first look: 8 repetitions, so 8 benches per arm and tier


def flagged_share(
    tier: int,
    requests: int,
    load: float,
    prefill_sd: float,
    *,
    groups: int,
    seed: int,
    slower_by: float = 0.0,
) -> float:
    """Share of simulated groups of GROUP benches (one arm at one tier) whose first bench's R
    exceeds its limit at TAIL; with `slower_by`, that bench's server is slower from mid-bench."""
    rng = np.random.default_rng(seed)
    first = closed_loop_ttfts(
        rng,
        groups,
        requests,
        tier,
        load=load,
        prefill_sd=prefill_sd,
        slower_from=requests // 2 if slower_by else None,
        slower_by=slower_by,
    )
    others = closed_loop_ttfts(
        rng, groups * (GROUP - 1), requests, tier, load=load, prefill_sd=prefill_sd
    )
    statistics = np.column_stack(
        [
            cusum_statistic(np.log(first[:, tier:]))[0],
            cusum_statistic(np.log(others[:, tier:]))[0].reshape(groups, GROUP - 1),
        ]
    )
    limit = step_limit(requests - tier, tier, GROUP, TAIL)
    return float((relative_statistics(statistics)[:, 0] > limit).mean())


def under(share: float, draws: int, level: float) -> bool:
    return share <= level + 3 * math.sqrt(level * (1 - level) / draws)


def test_an_undisturbed_bench_is_flagged_at_most_its_share_of_the_level_under_queueing():
    """Closed-loop regimes off the calibration grid (loads 1.5, 3 and 6; prefill CV 10-20 %),
    with the autocorrelation and the first-wave ramp a real queue has, at the template's three
    tiers: the union over the repetition's 9 benches keeps a repetition's false flags at most
    1 %. 20,000 seeded groups each, against the tail plus three binomial sds."""
    for seed, (tier, load, prefill_sd) in enumerate(
        [(4, 1.5, 0.1), (4, 3.0, 0.2), (8, 6.0, 0.1), (8, 3.0, 0.1), (16, 6.0, 0.2)]
    ):
        share = flagged_share(tier, REQUESTS, load, prefill_sd, groups=20_000, seed=seed)
        assert under(share, 20_000, TAIL), (tier, load, prefill_sd, share)


def test_where_the_grid_is_hardest_the_false_flag_rate_is_near_its_share_not_far_below():
    """The limit is the largest quantile over the grid, at the conservative end of its Monte
    Carlo error, so the declared share is an upper bound; in the regime that sets the limit at
    tier 4 (an unsaturated queue, prefill CV 5 %: a queueing wait now and then is a heavy tail)
    a fresh seed flags about two fifths of it: between a fifth and the share plus three binomial sds
    (a limit simulated wrong, too high or too low, falls outside)."""
    benches = GROUP << 14
    ttfts = closed_loop_ttfts(
        np.random.default_rng(99), benches, REQUESTS, 4, load=0.5, prefill_sd=0.05
    )
    statistics = cusum_statistic(np.log(ttfts[:, 4:]))[0].reshape(-1, GROUP)
    limit = step_limit(REQUESTS - 4, 4, GROUP, TAIL)
    share = float((relative_statistics(statistics) > limit).mean())
    assert share >= TAIL / 5 and under(share, benches, TAIL), share


def test_a_fifth_slower_server_from_mid_bench_is_found_nine_times_in_ten_at_every_tier():
    """The template's 64 requests, a saturated prefill queue (cold recovery: TTFT is mostly
    waiting) with 5 % prefill noise, at tiers 4, 8 and 16. A noisier, less loaded queue hides
    more of it (docs/decisions.md has the table) but is still found at tier 4 one time in 10."""
    for seed, tier in enumerate((4, 8, 16)):
        share = flagged_share(
            tier, REQUESTS, 4.0, 0.05, groups=2_000, seed=20 + seed, slower_by=0.2
        )
        assert share >= 0.9, (tier, share)
    noisy = flagged_share(4, REQUESTS, 3.0, 0.15, groups=2_000, seed=30, slower_by=0.2)
    assert noisy >= 0.1


def test_the_limits_are_simulated_seeded_and_memoised():
    """The template's shape (64 requests, the first look's 8 benches, 0.01 over 9 benches):
    the limits the docs quote come back from the seeded simulation, and a second call is the
    memoised value (no second simulation)."""
    limits = [step_limit(REQUESTS - tier, tier, GROUP, TAIL) for tier in (4, 8, 16)]
    assert [round(limit, 2) for limit in limits] == [3.75, 3.56, 4.16]
    assert step_limit(REQUESTS - 4, 4, GROUP, TAIL) == limits[0]
    # Another tail at the same shape reuses the simulated benches, and a looser one asks less.
    hits = null_statistics.cache_info().hits
    assert step_limit(REQUESTS - 4, 4, GROUP, 10 * TAIL) < limits[0]
    assert null_statistics.cache_info().hits == hits + 1


def simulated_group(seed: int, requests: int, stepped: int | None = None) -> list[list[float]]:
    """GROUP benches at tier 4 in a saturated queue; bench `stepped` a fifth slower from
    mid-bench."""
    rng = np.random.default_rng(seed)
    return [
        list(
            closed_loop_ttfts(
                rng,
                1,
                requests,
                4,
                load=4.0,
                prefill_sd=0.05,
                slower_from=requests // 2 if index == stepped else None,
                slower_by=0.2,
            )[0]
        )
        for index in range(GROUP)
    ]


def test_the_step_is_named_by_its_size_and_the_request_it_starts_at():
    group = simulated_group(3, 160, stepped=2)
    steps = find_steps(group, 4, [TAIL] * GROUP)
    assert [index for index, step in enumerate(steps) if step is not None] == [2]
    step = steps[2]
    assert step is not None and step.requests == 160
    assert 0.15 <= step.change <= 0.3 and 72 <= step.at_request <= 88
    assert find_steps(simulated_group(3, 160), 4, [TAIL] * GROUP) == [None] * GROUP


def test_the_check_is_scale_free():
    """Seconds or milliseconds, a faster or slower host, one bench slower all through than the
    others: the same statistics and the same verdicts."""
    group = simulated_group(5, REQUESTS, stepped=0)
    benches = [("baseline", 4, rep, ttfts) for rep, ttfts in enumerate(group, start=1)]
    checks, _ = step_checks(benches, LEVEL)
    assert [check["repetition"] for check in checks] == [1]
    for factors in ([1000.0] * GROUP, [0.001] * GROUP, [1.0 + 0.3 * i for i in range(GROUP)]):
        scaled = [
            (arm, tier, rep, [value * factor for value in ttfts])
            for (arm, tier, rep, ttfts), factor in zip(benches, factors, strict=True)
        ]
        again, _ = step_checks(scaled, LEVEL)
        assert [check["repetition"] for check in again] == [1]
        assert math.isclose(again[0]["observed"], checks[0]["observed"], rel_tol=1e-9)


def test_a_bench_without_per_request_ttfts_or_with_too_few_is_named_and_not_tested():
    enough = [1.0 + 0.01 * (i % 3) for i in range(64)]
    checks, notes = step_checks(
        [("baseline", 8, 1, None), ("offload", 16, 1, [1.0] * 30)]
        + [("recompute", 4, rep, enough) for rep in range(1, MIN_REPETITIONS)],
        LEVEL,
    )
    assert checks == []
    assert notes == [
        "step check skipped for baseline at tier 8, repetition(s) 1: its bench file has no "
        "per-request TTFTs",
        "step check skipped for offload at tier 16, repetition(s) 1: 30 timed requests at "
        "concurrency 16 leave 14 after the first wave; the check needs 16",
        "step check skipped for recompute at tier 4, repetition(s) 1-5: 5 repetition(s) with "
        "enough per-request TTFTs at this arm and tier; the check needs 6 to scale a bench by "
        "their median",
    ]


def test_benches_whose_ttfts_do_not_vary_are_named_not_flagged():
    """A stub server answering in constant time: the median CUSUM is 0, so one bench with any
    noise at all would be infinitely far out; the group is named as not tested instead."""
    flat = [("baseline", 4, rep, [0.2] * 64) for rep in range(1, 8)]
    noisy = [("baseline", 4, 8, [0.2 + 0.01 * (i % 5) for i in range(64)])]
    checks, notes = step_checks(flat + noisy, LEVEL)
    assert checks == []
    assert notes == [
        "step check skipped for baseline at tier 4, repetition(s) 1-8: the TTFTs of half or "
        "more of its benches do not vary after the first wave; there is no noise to scale a "
        "step by"
    ]


def test_benches_skipped_for_one_reason_everywhere_are_one_note():
    """A bench tool that keeps no per-request TTFTs: one line for every arm and tier, the
    repetitions as a range; arms and tiers that do not make a full grid keep their own lines."""
    everywhere = [
        (arm, tier, rep, None)
        for tier in (4, 8)
        for arm in ("baseline", "offload", "recompute")
        for rep in range(1, 9)
    ]
    assert step_checks(everywhere, LEVEL)[1] == [
        "step check skipped for baseline, offload and recompute at tiers 4 and 8, "
        "repetition(s) 1-8: its bench file has no per-request TTFTs"
    ]
    ragged = [("baseline", 4, 1, None), ("offload", 8, 1, None)]
    assert step_checks(ragged, LEVEL)[1] == [
        "step check skipped for baseline at tier 4, repetition(s) 1: its bench file has no "
        "per-request TTFTs",
        "step check skipped for offload at tier 8, repetition(s) 1: its bench file has no "
        "per-request TTFTs",
    ]


def test_an_early_look_never_reads_as_certain():
    from gates.decisions.cells.readout import confidence_text

    assert [confidence_text(c) for c in (0.9, 0.9995, 0.99996, 1.0)] == [
        "90.00%",
        "99.950%",
        "99.9960%",
        "above 99.9999%",
    ]


STEPS = {"outliers": {"max_reruns": 2, "step_level": LEVEL}}


def with_ttfts(rows: list[dict], stepped: tuple[int, str] | None = None) -> list[dict]:
    """Each bench gets 64 simulated TTFTs at tier 4 (saturated queue); `stepped`'s bench has its
    server a fifth slower from request 33 on."""
    rng = np.random.default_rng(8)
    for row in rows:
        step = stepped == (row["repetition"], row["arm"])
        ttfts = closed_loop_ttfts(
            rng,
            1,
            REQUESTS,
            4,
            load=4.0,
            prefill_sd=0.05,
            slower_from=32 if step else None,
            slower_by=0.2,
        )[0]
        row["metrics"]["per_request"] = {"count": REQUESTS, "ttft_ms": list(1000.0 * ttfts)}
    return rows


def test_a_repetition_with_a_step_is_set_aside_and_shown():
    rows = with_ttfts(paired([0.60, 0.62, 0.59, 0.61, 0.60, 0.62], tier=4), (3, "baseline"))
    spec = g3_spec(statistics=STEPS, tiers=[4])
    result = decide_g3(spec, rows, CONTEXT)
    (aside,) = result["set_aside"]
    assert aside["repetition"] == 3
    assert "baseline at tier 4, repetition 3: step of +" in aside["reasons"][0]
    assert "in TTFT at request" in aside["reasons"][0] and "of 64" in aside["reasons"][0]
    assert 3 not in [pair["repetition"] for pair in result["clauses"][0]["pairs"]]
    assert result["inputs"]["statistics"]["step_level"] == LEVEL
    assert len(result["clauses"][0]["pairs"]) == 5
    assert "the median of the 6 benches of this arm and tier" in aside["reasons"][0]
    # Left out of the spec, no check: the same data decide on the disturbed repetition.
    assert decide_g3(g3_spec(tiers=[4]), rows, CONTEXT)["set_aside"] == []


def test_without_per_request_records_the_check_is_skipped_and_said():
    result = decide_g3(g3_spec(statistics=STEPS), paired([0.60, 0.62, 0.59, 0.61]), CONTEXT)
    assert result["set_aside"] == []
    assert any("its bench file has no per-request TTFTs" in note for note in result["notes"])


def test_with_the_check_on_false_pass_under_a_step_returns_to_its_declared_rate():
    """The template's plan (looks 8..28, its share of the budget, 8 cells) at its stated noise
    (CV 4 % per arm) on the cell "ttft_p50 reduction >= 25 % at tier 4" at its bar, one of the
    first look's repetitions with its baseline bench a fifth slower from request 33 of 64, in a
    saturated queue (where the check finds such a step; see the docs for where it does not)."""
    gates, declared = 20_000, 0.025
    found = stepped_gates(
        np.random.default_rng(2026),
        gates,
        SequentialPlan(8, 28, 0.90, attempts=2, cells=8),
        sd_from_cv(4),
        sd_floor=0.01,
        level=LEVEL,
        benches_per_repetition=BENCHES,
        requests=REQUESTS,
        tier=4,
        load=4.0,
        prefill_sd=0.05,
        slower_by=0.2,
    )
    assert found.false_pass_unchecked > declared + 3 * math.sqrt(declared / gates)
    assert under(found.false_pass_checked, gates, declared)
    assert found.stepped_flagged >= 0.9
    assert under(found.undisturbed_flagged, gates, TAIL)
