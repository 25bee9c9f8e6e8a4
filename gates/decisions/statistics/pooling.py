"""Pooling the variance of one clause's cells across concurrency tiers, where the data support it.

With 4 repetitions a cell's own sd has 3 degrees of freedom, and the t critical values that fit
it are large. The tiers of one clause measure the same metric ratio on the same arms, so when
their spreads agree a pooled sd over k tiers has k * (n - 1) degrees of freedom and the
boundaries for it (gates.decisions.statistics.boundaries, `pool`) are much smaller. Pooling is
valid only
if the tiers' noise is alike and independent, so at every look it is decided from the data:

- alike: Bartlett's test of equal variances (scipy) does not reject at HOMOGENEITY_ALPHA;
- independent: the mean pairwise correlation of the tiers' deviations is at most
  MAX_MEAN_CORRELATION (tiers measured in the same server session can move together, and
  correlated spreads carry fewer degrees of freedom than the count says).

Otherwise each cell keeps its own sd. A pooled cell uses the larger of the pooled and its own
variance: with 4 repetitions no test can tell a tier 1.5 times noisier than the others, and the
pooled variance alone would then pass that tier's cell too often (9 % instead of 5 % in the
simulation of docs/decisions.md); the larger one keeps it at 6.5 %, and below the declared rate
when the tiers' noise is alike. That residual risk is why pooling is the spec's choice
(`statistics.pool_tiers`, signed by both parties), not the default.
Pure: numpy and scipy; imports no Django.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

HOMOGENEITY_ALPHA = 0.10
MAX_MEAN_CORRELATION = 0.3


def pooled_variance(
    window: np.ndarray, reached: np.ndarray, groups: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per row and cell of `window` (rows, cells, n): the variance to use and the number of
    cells it was pooled over (1: the cell's own)."""
    own = window.var(axis=-1, ddof=1)
    variance = own.copy()
    pool = np.ones(variance.shape, dtype=int)
    if groups is None:
        return variance, pool
    groups = np.asarray(groups)
    for group in np.unique(groups[groups >= 0]):
        members = np.flatnonzero((groups == group) & reached)
        if members.size < 2:
            continue
        supported = pooling_supported(window[:, members, :])
        pooled = own[:, members].mean(axis=1, keepdims=True)  # equal n: the plain mean
        kept = np.maximum(pooled, own[:, members])
        variance[:, members] = np.where(supported[:, None], kept, own[:, members])
        pool[:, members] = np.where(supported[:, None], members.size, 1)
    return variance, pool


def pooling_supported(cells: np.ndarray) -> np.ndarray:
    """Per row of `cells` (rows, k, n): whether the k cells' spreads are alike and independent."""
    deviations = cells - cells.mean(axis=-1, keepdims=True)
    squares = (deviations**2).sum(axis=-1)
    if cells.shape[-1] < 3:
        return np.zeros(cells.shape[0], dtype=bool)
    spread = np.all(squares > 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        _, p_value = stats.bartlett(*np.moveaxis(cells, 1, 0), axis=-1)
    supported: np.ndarray = (
        spread
        & (np.nan_to_num(p_value) >= HOMOGENEITY_ALPHA)
        & (mean_correlation(deviations, squares) <= MAX_MEAN_CORRELATION)
    )
    return supported


def mean_correlation(deviations: np.ndarray, squares: np.ndarray) -> np.ndarray:
    """The mean Pearson correlation over every pair of the k cells, per row."""
    k = deviations.shape[1]
    total: np.ndarray = np.zeros(deviations.shape[0])
    for i in range(k):
        for j in range(i + 1, k):
            with np.errstate(divide="ignore", invalid="ignore"):
                r = (deviations[:, i] * deviations[:, j]).sum(axis=-1) / np.sqrt(
                    squares[:, i] * squares[:, j]
                )
            total += np.nan_to_num(r, nan=1.0)
    mean: np.ndarray = total / (k * (k - 1) / 2)
    return mean
