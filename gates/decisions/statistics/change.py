"""The change between two runs of one cell: a Welch interval on the difference of the runs' mean
log values (the log of the ratio of their geometric means), and whether it is told from noise.
Pure: numbers in, a typed change out; imports no Django.

The two runs are independent samples with their own spread (a later run may be noisier), so
their variances are not pooled: Welch's standard error with Satterthwaite's degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

METHOD = "Welch t interval on the difference of the runs' mean log values"
MIN_SAMPLES = 2  # per run: one value has no spread to judge noise by


@dataclass(frozen=True)
class Change:
    """After against before on the log scale; `ratio_*` are the same on the ratio scale."""

    log_change: float
    low: float
    high: float
    degrees_of_freedom: float
    confidence: float
    before_n: int
    after_n: int

    @property
    def ratio(self) -> float:
        return math.exp(self.log_change)

    @property
    def ratio_low(self) -> float:
        return math.exp(self.low)

    @property
    def ratio_high(self) -> float:
        return math.exp(self.high)

    @property
    def distinguishable(self) -> bool:
        """The interval excludes no change: the difference is more than run-to-run noise."""
        return self.low > 0 or self.high < 0


def welch_change(
    before: Sequence[float], after: Sequence[float], confidence: float
) -> Change | None:
    """The change from `before` to `after` (log values, e.g. each repetition's log-ratio);
    None when either run has fewer than two finite values."""
    a, b = _finite(before), _finite(after)
    if a.size < MIN_SAMPLES or b.size < MIN_SAMPLES:
        return None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    difference = float(b.mean() - a.mean())
    se = math.sqrt(va + vb)
    df = float(_satterthwaite(va, vb, a.size, b.size))
    half = float(stats.t.isf((1 - confidence) / 2, df)) * se if se > 0 else 0.0
    return Change(difference, difference - half, difference + half, df, confidence, a.size, b.size)


def _satterthwaite(va: float, vb: float, na: int, nb: int) -> float:
    denominator = va**2 / (na - 1) + vb**2 / (nb - 1)
    # Both runs without spread: any df gives a zero-width interval; take the pooled one.
    return (va + vb) ** 2 / denominator if denominator > 0 else float(na + nb - 2)


def _finite(values: Sequence[float]) -> np.ndarray:
    return np.asarray([v for v in values if _is_finite(v)], dtype=float)


def _is_finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
