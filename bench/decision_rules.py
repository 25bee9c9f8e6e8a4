"""The rules the G3 engine is compared with in bench/decision_error_rates.py, each on the same
simulated per-repetition values of two arms (log scale, shape (gates, repetitions)):

- fixed percentage: one run per arm, pass when the observed change clears the bar;
- Perfherder-style: every repetition, an unpaired Welch t test of the two arms' log values
  against no change (Mozilla Perfherder's compare view); pass when the change is significant
  (p < 0.05) and its mean clears the bar, else fail;
- Bencher-style threshold: the baseline's repetitions, moved to the bar, set a t-test
  boundary (upper boundary 0.99, as Bencher's t-test threshold model); the offload arm's latest
  run passes unless it lies beyond that boundary (an alert), i.e. unless it is clearly worse
  than the bar.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def fixed_percentage_pass(offload: np.ndarray, baseline: np.ndarray, bound: float) -> np.ndarray:
    """Reduction clause: pass when the first run's ratio is at most the bound ratio."""
    return offload[:, 0] - baseline[:, 0] <= math.log(bound)


def perfherder_pass(offload: np.ndarray, baseline: np.ndarray, bound: float) -> np.ndarray:
    test = stats.ttest_ind(offload, baseline, axis=1, equal_var=False)
    change = offload.mean(axis=1) - baseline.mean(axis=1)
    return (test.pvalue < 0.05) & (change <= math.log(bound))


def bencher_pass(offload: np.ndarray, baseline: np.ndarray, bound: float) -> np.ndarray:
    history = baseline + math.log(bound)
    size = history.shape[1]
    spread = history.std(axis=1, ddof=1) * math.sqrt(1 + 1 / size)
    boundary = history.mean(axis=1) + stats.t.isf(0.01, size - 1) * spread
    return offload[:, -1] <= boundary
