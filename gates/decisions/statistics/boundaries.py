"""Group-sequential critical values that fit the Student t statistic of a G3 cell.

The t statistics of one cell at its planned looks share data, so a union (Bonferroni) bound
over the looks wastes much of the error budget, and normal-theory boundaries converted to t are
too lenient with 3-7 degrees of freedom (5.5 % instead of 5 % at looks 4, 6, 8). Under the null
the joint law of those t statistics does not depend on the noise, so it is simulated once per
look schedule from a fixed seed, and each look's critical value is the quantile that spends
exactly the error the spending function allows there. Pure: numpy and scipy only; no Django.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

NULL_PATHS = 2**18  # Monte Carlo sd of a spent 2.5 %: 0.03 percentage points
BOUNDARY_SEED = 20261201
METHOD = (
    f"exact t boundaries: one-sided error per side spent with the O'Brien-Fleming-type function "
    f"of Lan & DeMets over the looks; each look's critical t is the quantile of the null t "
    f"statistics ({NULL_PATHS} simulated paths, seed {BOUNDARY_SEED}) not stopped earlier"
)


def spent_level(level: float, fraction: float) -> float:
    """Cumulative one-sided error spent by information fraction `fraction` (0 < f <= 1).

    O'Brien-Fleming-type: little at early looks, so the last look keeps most of the budget.
    """
    return float(2 * stats.norm.sf(stats.norm.isf(level / 2) / math.sqrt(fraction)))


def critical_values(
    looks: tuple[int, ...], max_repetitions: int, level: float, pool: int = 1
) -> tuple[float, ...]:
    """The critical t per look: a cell crosses at look i when its t reaches value i.

    Over all looks together a cell whose true margin is 0 crosses with chance `level` (one side).
    `pool` cells sharing one variance estimate (the cell's own and pool - 1 others of the same
    spread): at n repetitions its t has pool * (n - 1) degrees of freedom instead of n - 1.
    """
    if level <= 0:
        return tuple(math.inf for _ in looks)
    return _critical_values(tuple(looks), int(max_repetitions), round(float(level), 15), pool)


@lru_cache(maxsize=512)
def _critical_values(
    looks: tuple[int, ...], max_repetitions: int, level: float, pool: int = 1
) -> tuple[float, ...]:
    paths = _null_t_statistics(looks, pool)
    alive = np.ones(paths.shape[0], dtype=bool)
    crossed = 0
    values = []
    for index, size in enumerate(looks):
        quota = round(spent_level(level, min(size / max_repetitions, 1.0)) * NULL_PATHS) - crossed
        candidates = paths[alive, index]
        value = _top_quantile(candidates, quota)
        crossing = alive & (paths[:, index] >= value)
        crossed += int(crossing.sum())
        alive &= ~crossing
        values.append(value)
    return tuple(values)


def _top_quantile(values: np.ndarray, count: int) -> float:
    """The smallest value that exactly `count` of `values` reach (none when count <= 0)."""
    if count <= 0 or values.size == 0:
        return float(np.nextafter(values.max(initial=0.0), math.inf))
    count = min(count, values.size)
    return float(np.partition(values, values.size - count)[values.size - count])


@lru_cache(maxsize=16)
def _null_t_statistics(looks: tuple[int, ...], pool: int = 1) -> np.ndarray:
    """t statistics of standard normal samples at each look, shape (NULL_PATHS, looks); with
    `pool` > 1 the variance also takes the squares of pool - 1 other cells' samples."""
    rng = np.random.default_rng(BOUNDARY_SEED)
    total = np.zeros(NULL_PATHS)
    squares = np.zeros(NULL_PATHS)
    # Each new repetition adds one chi-square(1) to another cell's sum of squared deviations
    # (Helmert), independent of its mean: pool - 1 cells add a chi-square(pool - 1).
    others = np.zeros(NULL_PATHS)
    found = np.empty((NULL_PATHS, len(looks)))
    for size in range(1, looks[-1] + 1):
        draw = rng.standard_normal(NULL_PATHS)
        total += draw
        squares += draw * draw
        if pool > 1 and size > 1:
            others += rng.chisquare(pool - 1, NULL_PATHS)
        if size in looks:
            mean = total / size
            deviations = squares - size * mean * mean + others
            variance = deviations / (pool * (size - 1))
            found[:, looks.index(size)] = mean / np.sqrt(variance / size)
    return found
