"""Group-sequential critical values that fit the Student t statistic of a G3 cell.

The t statistics of one cell at its planned looks share data, so a union (Bonferroni) bound
over the looks wastes much of the error budget, and normal-theory boundaries converted to t are
too lenient with 3-7 degrees of freedom (5.5 % instead of 5 % at looks 4, 6, 8). Under the null
the joint law of those t statistics does not depend on the noise, so it is simulated once per
look schedule (2^24 paths, fixed seed) and each look's critical value is the quantile that
spends the error the spending function allows there, taken at the conservative end of its own
Monte Carlo uncertainty, so the realised level is at most the declared one.
Pure: numpy and scipy only; no Django.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

NULL_PATHS = 2**24
BOUNDARY_SEED = 20261201
# The crossing count a quantile is taken at satisfies count + Z * sqrt(count) <= allowed: the
# true tail chance at the k-th largest of N draws has mean k/N and sd about sqrt(k)/N, so the
# spent error exceeds the allowed one with chance at most 0.13 % (one-sided Z = 3).
CONSERVATIVE_Z = 3.0
_CHUNK = 2**20
METHOD = (
    f"exact t boundaries: one-sided error per side spent with the O'Brien-Fleming-type function "
    f"of Lan & DeMets over the looks; each look's critical t is the quantile of the null t "
    f"statistics ({NULL_PATHS} simulated paths, seed {BOUNDARY_SEED}) not stopped earlier, at "
    f"the conservative end ({CONSERVATIVE_Z:g} sd) of its Monte Carlo uncertainty"
)


def spent_level(level: float, fraction: float) -> float:
    """Cumulative one-sided error spent by information fraction `fraction` (0 < f <= 1).

    O'Brien-Fleming-type: little at early looks, so the last look keeps most of the budget.
    """
    return float(2 * stats.norm.sf(stats.norm.isf(level / 2) / math.sqrt(fraction)))


def critical_values(
    looks: tuple[int, ...],
    max_repetitions: int,
    level: float,
    pool: int = 1,
    *,
    paths: int | None = None,
) -> tuple[float, ...]:
    """The critical t per look: a cell crosses at look i when its t reaches value i.

    Over all looks together a cell whose true margin is 0 crosses with chance at most `level`
    (one side). `pool` cells sharing one variance estimate (the cell's own and pool - 1 others
    of the same spread): at n repetitions its t has pool * (n - 1) degrees of freedom instead of
    n - 1. `paths` (default NULL_PATHS) is lowered only for sizing estimates and shape tests.
    """
    if level <= 0:
        return tuple(math.inf for _ in looks)
    count = NULL_PATHS if paths is None else int(paths)
    return _critical_values(
        tuple(looks), int(max_repetitions), round(float(level), 15), pool, count
    )


def conservative_count(allowed: float) -> int:
    """The largest crossing count k with k + CONSERVATIVE_Z * sqrt(k) <= allowed (>= 0)."""
    if allowed <= 0:
        return 0
    root = (-CONSERVATIVE_Z + math.sqrt(CONSERVATIVE_Z**2 + 4 * allowed)) / 2
    return max(0, math.floor(root * root))


@lru_cache(maxsize=2048)
def _critical_values(
    looks: tuple[int, ...], max_repetitions: int, level: float, pool: int, paths: int
) -> tuple[float, ...]:
    tails = _null_tails(looks, pool, paths, _bucket(level))
    alive = np.ones(tails.shape[0], dtype=bool)
    crossed = 0
    values = []
    for index, size in enumerate(looks):
        allowed = spent_level(level, min(size / max_repetitions, 1.0)) * paths
        quota = conservative_count(allowed) - crossed
        value = _top_quantile(tails[alive, index], quota, _floor(looks, pool, index))
        crossing = alive & (tails[:, index] >= value)
        crossed += int(crossing.sum())
        alive &= ~crossing
        values.append(value)
    return tuple(values)


def _top_quantile(values: np.ndarray, count: int, floor: float) -> float:
    """The smallest value that exactly `count` of `values` reach; above all when count <= 0."""
    if count <= 0 or values.size == 0:
        return float(np.nextafter(max(float(values.max(initial=floor)), floor), math.inf))
    count = min(count, values.size)
    return float(np.partition(values, values.size - count)[values.size - count])


def _bucket(level: float) -> float:
    """The largest level a stored tail serves; one simulation per schedule for the usual ones."""
    return 0.05 if level <= 0.05 else 0.25


def _floor(looks: tuple[int, ...], pool: int, index: int) -> float:
    """The median of the look's t: every stored path lies above it at some look."""
    return float(stats.t.isf(0.5, pool * (looks[index] - 1)))


@lru_cache(maxsize=32)
def _null_tails(looks: tuple[int, ...], pool: int, paths: int, bucket: float) -> np.ndarray:
    """Null t statistics at each look, shape (kept, looks), of the paths whose t reaches the
    marginal Student t quantile at twice `bucket` at some look. A boundary at cumulative level
    a <= bucket is at least that quantile (the marginal law of t at a look is exactly Student
    t), so the paths left out cannot cross and need not be stored."""
    thresholds = np.array(
        [stats.t.isf(min(0.5, 2 * bucket), pool * (n - 1)) for n in looks], dtype=np.float32
    )
    rng = np.random.default_rng(BOUNDARY_SEED)
    kept = []
    for start in range(0, paths, _CHUNK):
        found = null_t_statistics(looks, pool, min(_CHUNK, paths - start), rng)
        kept.append(found[(found >= thresholds).any(axis=1)])
    return np.concatenate(kept)


def null_t_statistics(
    looks: tuple[int, ...], pool: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """t statistics of standard normal samples at each look, shape (count, looks), float32.

    Drawn block by block: the d repetitions between two looks add a sum ~ N(0, d) and a
    within-block sum of squares ~ chi-square(d - 1), independent (Helmert), so a path needs two
    draws per look whatever its length. With `pool` > 1 the variance also takes the squares of
    pool - 1 other cells: each repetition after the first adds a chi-square(pool - 1)."""
    total = np.zeros(count, dtype=np.float32)
    squares = np.zeros(count, dtype=np.float32)
    found = np.empty((count, len(looks)), dtype=np.float32)
    before = 0
    for index, size in enumerate(looks):
        block = size - before
        draw = rng.standard_normal(count, dtype=np.float32) * np.float32(math.sqrt(block))
        if before:
            gap = total / np.float32(before) - draw / np.float32(block)
            squares += np.float32(before * block / size) * gap * gap
        squares += _chi_square(rng, block - 1, count)
        squares += _chi_square(rng, (pool - 1) * (size - max(before, 1)), count)
        total += draw
        before = size
        scale = np.sqrt(squares / np.float32(pool * (size - 1)))
        with np.errstate(divide="ignore", invalid="ignore"):
            found[:, index] = total / np.float32(math.sqrt(size)) / scale
    return found


def _chi_square(rng: np.random.Generator, df: int, count: int) -> np.ndarray | np.float32:
    if df <= 0:
        return np.float32(0.0)
    return np.float32(2.0) * rng.standard_gamma(df / 2, count, dtype=np.float32)
