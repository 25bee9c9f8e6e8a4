"""A goodput floor on the scale its statistics work on: each repetition's share of requests
within the SLO as a margin above the bar, and the sd floor the binomial sampling of a share puts
under a cell, so the sequential t machinery of the ratio clauses (inference.decide_cells)
applies to it unchanged, one margin per repetition, positive on the passing side.
numpy only; imports no Django.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def share_margins(shares: Sequence[float] | np.ndarray, bar: float) -> np.ndarray:
    """Each repetition's share (a fraction) as its distance above the bar, in share units."""
    return np.asarray(shares, dtype=float) - bar


def margin_to_share(margin: float, bar: float) -> float:
    """A margin (or an interval end) back as a share, clipped to [0, 1]."""
    return min(max(margin + bar, 0.0), 1.0)


def binomial_sd_floor(bar: float, requests: Sequence[int]) -> float:
    """The sd a cell's repetitions are held to at least: the binomial sd of one bench's share
    at the bar, sqrt(bar (1 - bar) / n). Repetitions can agree more closely than that only by
    luck (four benches at 100 % make a t interval of zero width), and the bar is where a wrong
    verdict is likeliest: under "the true share is at the bar", either side's null, it is the
    true sd of each share, so the t statistic is never sharper than the binomial noise allows.
    Above the bar near 100 % it overstates the spread (costing power, never a false pass);
    run-to-run variation beyond the binomial shows in the sample sd, which is used when larger.
    A variance-stabilising arcsine scale was tried and refused: its mean is biased upwards when
    few requests miss (100 requests at 99 %: a false pass three times the declared rate).
    With unequal request counts, the root mean variance."""
    counts = np.asarray(requests, dtype=float)
    if counts.size == 0 or (counts <= 0).any():
        return 0.0
    return float(math.sqrt(bar * (1 - bar) * np.mean(1 / counts)))
