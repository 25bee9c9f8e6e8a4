"""Statistics of a G3 decision: paired log-ratio t intervals, the sequential look plan that splits
the error budget across looks, and the power estimate. numpy + scipy only; imports no Django.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

PASS, FAIL, OPEN = 1, -1, 0
VERDICT_NAMES = {PASS: "pass", FAIL: "fail", OPEN: "inconclusive"}
PLAN_METHOD = (
    "looks at min, midpoint and max repetitions; two-sided error budget 1 - confidence spent "
    "with the O'Brien-Fleming-type function of Lan & DeMets; each look's interval uses the "
    "increment spent at that look (Bonferroni across looks)"
)


@dataclass(frozen=True)
class SequentialPlan:
    """The pre-declared looks of a G3 gate and the two-sided alpha each look may use."""

    min_repetitions: int
    max_repetitions: int
    confidence: float

    @property
    def looks(self) -> tuple[int, ...]:
        middle = (self.min_repetitions + self.max_repetitions) // 2
        return tuple(sorted({self.min_repetitions, middle, self.max_repetitions}))

    @property
    def look_alphas(self) -> tuple[float, ...]:
        alpha = 1 - self.confidence
        spent = [spent_alpha(alpha, size / self.max_repetitions) for size in self.looks]
        return tuple(now - before for before, now in zip([0.0, *spent[:-1]], spent, strict=True))

    def next_look(self, pairs: int) -> int | None:
        """The first planned look that needs more than `pairs` repetitions, if any is left."""
        return next((size for size in self.looks if size > pairs), None)

    def as_dict(self) -> dict:
        return {
            "min_repetitions": self.min_repetitions,
            "max_repetitions": self.max_repetitions,
            "confidence": self.confidence,
            "looks": list(self.looks),
            "look_alphas": list(self.look_alphas),
            "method": PLAN_METHOD,
        }


@dataclass(frozen=True)
class LookOutcome:
    """Per row: the verdict code, the index of the deciding (or last reached) look, and the
    margin interval at that look. Rows that reached no look have look -1 and NaN numbers."""

    verdict: np.ndarray
    look: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray


def spent_alpha(alpha: float, fraction: float) -> float:
    """Cumulative two-sided alpha spent by information fraction `fraction` (0 < fraction <= 1).

    O'Brien-Fleming-type: little at early looks, so a later look keeps most of the budget.
    """
    z = stats.norm.isf(alpha / 2)
    return float(2 * stats.norm.sf(z / math.sqrt(fraction)))


def t_interval(samples: np.ndarray, alpha: float) -> tuple[np.ndarray, ...]:
    """Mean, sd and the two-sided (1 - alpha) Student t interval along the last axis."""
    size = samples.shape[-1]
    mean = samples.mean(axis=-1)
    sd = samples.std(axis=-1, ddof=1)
    half = stats.t.isf(alpha / 2, size - 1) * sd / math.sqrt(size)
    return mean, sd, mean - half, mean + half


def clause_margins(log_ratios: np.ndarray, change: str, bound_ratio: float) -> np.ndarray:
    """Log-ratios as distances from the clause bound, positive on the passing side.

    A reduction passes below its bound ratio; a gain or a ratio clause passes above it.
    """
    sign = -1.0 if change == "reduction" else 1.0
    return sign * (np.asarray(log_ratios, dtype=float) - math.log(bound_ratio))


def decide_sequentially(margins: np.ndarray, plan: SequentialPlan) -> LookOutcome:
    """Walk the planned looks over rows of per-repetition margins, in repetition order.

    A margin is the log-ratio's distance from the threshold, positive on the passing side. A row
    passes at the first look whose interval lies wholly at or above 0, fails at the first whose
    interval lies wholly below 0, and stays open otherwise; later looks do not revisit it.
    """
    # Rows are independent gates (the tests and the bench simulate thousands at once); the
    # engine passes a single row, so both walk the very same code.
    rows, available = margins.shape
    verdict = np.full(rows, OPEN)
    look = np.full(rows, -1)
    numbers = [np.full(rows, np.nan) for _ in range(4)]
    for index, (size, alpha) in enumerate(zip(plan.looks, plan.look_alphas, strict=True)):
        if size > available:
            break
        found = t_interval(margins[:, :size], alpha)
        still_open = verdict == OPEN
        for target, values in zip(numbers, found, strict=True):
            target[still_open] = values[still_open]
        look[still_open] = index
        verdict[still_open & (found[2] >= 0)] = PASS
        verdict[still_open & (found[3] < 0)] = FAIL
    return LookOutcome(verdict, look, *numbers)


def pass_probability(size: int, alpha: float, margin: float, sd: float) -> float:
    """Chance that one t interval of `size` pairs lies wholly on the side of a true `margin`."""
    if margin == 0:
        return 0.0
    if sd <= 0:
        return 1.0
    critical = stats.t.isf(alpha / 2, size - 1)
    return float(stats.nct.sf(critical, size - 1, abs(margin) * math.sqrt(size) / sd))


def repetitions_needed(
    *,
    true_ratio: float,
    bound_ratio: float,
    sd_log_ratio: float,
    confidence: float,
    min_repetitions: int,
    power: float = 0.9,
    limit: int = 100,
) -> int | None:
    """The smallest repetitions.max whose final look alone decides with at least `power`.

    A true ratio on the passing side of the bound is then shown to pass, one on the failing
    side to fail. Errs on the safe side: early looks add chances to decide. None when `limit` is not
    enough (or the true ratio sits exactly on the bound, which no budget can decide).
    """
    if true_ratio <= 0 or bound_ratio <= 0 or not math.isfinite(sd_log_ratio) or sd_log_ratio < 0:
        raise ValueError("ratios must be positive and the noise a finite non-negative number")
    margin = math.log(true_ratio) - math.log(bound_ratio)
    # The final look's alpha shrinks as the budget grows (earlier looks spend some), so scan.
    for budget in range(max(min_repetitions, 2), limit + 1):
        plan = SequentialPlan(max(min_repetitions, 2), budget, confidence)
        if pass_probability(budget, plan.look_alphas[-1], margin, sd_log_ratio) >= power:
            return budget
    return None
