"""The compare interval: a Welch t interval on the difference of two runs' mean log values.
Seeded simulations hold it to its stated coverage; identical runs give no change."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gates.decisions.statistics.change import welch_change

SIMULATIONS = 2000


@pytest.mark.parametrize(
    ("effect", "sd_before", "sd_after", "n_before", "n_after"),
    [(0.0, 0.05, 0.05, 8, 8), (-0.10, 0.04, 0.09, 8, 5), (0.25, 0.10, 0.02, 4, 12)],
)
def test_the_interval_covers_a_known_effect_at_its_stated_rate(
    effect, sd_before, sd_after, n_before, n_after
):
    rng = np.random.default_rng(20260)
    covered = 0
    for _ in range(SIMULATIONS):
        before = rng.normal(-0.3, sd_before, n_before)
        after = rng.normal(-0.3 + effect, sd_after, n_after)
        change = welch_change(before.tolist(), after.tolist(), 0.90)
        covered += change.low <= effect <= change.high
    # 90 % stated; the binomial sd over 2,000 simulations is 0.7 %: 4 sd either side.
    assert abs(covered / SIMULATIONS - 0.90) < 0.027


def test_unequal_spreads_break_a_pooled_interval_but_not_welchs():
    """A positive control: with a small noisy run against a large quiet one, pooling the
    variances under-covers; Welch's interval holds its rate on the same draws."""
    rng = np.random.default_rng(7)
    welch = pooled = 0
    for _ in range(SIMULATIONS):
        before, after = rng.normal(0, 0.02, 16), rng.normal(0, 0.12, 4)
        change = welch_change(before.tolist(), after.tolist(), 0.90)
        welch += change.low <= 0 <= change.high
        pooled += abs(after.mean() - before.mean()) <= _pooled_half(before, after)
    assert abs(welch / SIMULATIONS - 0.90) < 0.03
    assert pooled / SIMULATIONS < 0.80


def _pooled_half(before: np.ndarray, after: np.ndarray) -> float:
    from scipy import stats

    df = before.size + after.size - 2
    pooled = ((before.size - 1) * before.var(ddof=1) + (after.size - 1) * after.var(ddof=1)) / df
    se = math.sqrt(pooled * (1 / before.size + 1 / after.size))
    return float(stats.t.isf(0.05, df)) * se


def test_identical_runs_change_by_nothing_and_are_not_told_from_noise():
    values = [-0.35, -0.36, -0.26, -0.39, -0.31]
    change = welch_change(values, list(values), 0.90)
    assert change.log_change == pytest.approx(0.0, abs=1e-12)
    assert change.ratio == pytest.approx(1.0)
    assert change.low < 0 < change.high and not change.distinguishable


def test_a_large_shift_is_told_from_noise_on_the_side_it_went():
    before = [-0.35, -0.36, -0.26, -0.39, -0.31, -0.33]
    after = [value - 0.2 for value in before]
    change = welch_change(before, after, 0.90)
    assert change.distinguishable and change.high < 0
    assert change.ratio == pytest.approx(math.exp(-0.2))
    assert change.ratio_low < change.ratio < change.ratio_high < 1


def test_runs_without_spread_give_a_zero_width_interval():
    change = welch_change([0.1, 0.1, 0.1], [0.2, 0.2], 0.90)
    assert change.low == pytest.approx(0.1) and change.high == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("before", "after"),
    [([0.1], [0.1, 0.2]), ([0.1, 0.2], []), ([0.1, float("nan")], [0.2, 0.3]), ([], [])],
)
def test_fewer_than_two_finite_values_in_a_run_give_no_change(before, after):
    assert welch_change(before, after, 0.90) is None
