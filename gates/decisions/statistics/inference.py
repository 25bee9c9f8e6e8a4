"""Statistics of a G3 decision: paired log-ratio t intervals, the pre-declared looks at even
repetition counts, the walk over a gate's cells (every cell must pass; the fail side is
controlled over all cells with Holm's step-down), and the power estimate.
numpy + scipy only; imports no Django.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from documents.cell import CellVerdict, PlanSummary
from gates.decisions.statistics.boundaries import METHOD, critical_values
from gates.decisions.statistics.pooling import pooled_variance

PASS, FAIL, OPEN = 1, -1, 0
DESIGN_PATHS = 2**16
VERDICT_NAMES: dict[int, CellVerdict] = {PASS: "pass", FAIL: "fail", OPEN: "inconclusive"}
PLAN_METHOD = (
    "looks at min, the even midpoint and max repetitions; the two-sided error budget "
    "(1 - confidence) is split evenly across the spec's attempts; per side, "
    + METHOD
    + "; a gate passes only when every cell passes (intersection-union, no correction), and the "
    "fail side is controlled over all cells with Holm's step-down"
)


@dataclass(frozen=True)
class SequentialPlan:
    """The pre-declared looks of a G3 attempt and the critical values each look uses.

    `attempts` splits the error budget across the attempts a spec allows (a team that re-runs
    an inconclusive gate spends it); `cells` is the family the fail side is controlled over.
    """

    min_repetitions: int
    max_repetitions: int
    confidence: float
    attempts: int = 1
    cells: int = 1
    paths: int | None = None  # boundary paths; fewer only for sizing scans (DESIGN_PATHS)

    @property
    def looks(self) -> tuple[int, ...]:
        # Even looks: the A B C / C B A order cancels linear drift only over whole pairs.
        middle = 2 * ((self.min_repetitions + self.max_repetitions) // 4)
        chosen = {self.min_repetitions, middle, self.max_repetitions}
        return tuple(sorted(n for n in chosen if self.min_repetitions <= n <= self.max_repetitions))

    @property
    def alpha(self) -> float:
        """The two-sided error budget of one attempt."""
        return (1 - self.confidence) / self.attempts

    @property
    def pass_critical(self) -> tuple[float, ...]:
        return critical_values(self.looks, self.max_repetitions, self.alpha / 2, paths=self.paths)

    def pass_critical_pooled(self, pool: int) -> tuple[float, ...]:
        """Pass-side critical values of a cell whose variance is pooled over `pool` cells."""
        return critical_values(
            self.looks, self.max_repetitions, self.alpha / 2, pool, paths=self.paths
        )

    def fail_critical(self, open_hypotheses: int, pool: int = 1) -> tuple[float, ...]:
        """Critical values of the fail side with `open_hypotheses` cells not yet failed."""
        level = self.alpha / 2 / open_hypotheses
        return critical_values(self.looks, self.max_repetitions, level, pool, paths=self.paths)

    @property
    def look_alphas(self) -> tuple[float, ...]:
        """Each look's pass-side critical value as the alpha of a two-sided t interval."""
        return tuple(
            float(2 * stats.t.sf(value, size - 1))
            for size, value in zip(self.looks, self.pass_critical, strict=True)
        )

    def next_look(self, pairs: int) -> int | None:
        """The first planned look that needs more than `pairs` repetitions, if any is left."""
        return next((size for size in self.looks if size > pairs), None)

    def as_dict(self) -> PlanSummary:
        return {
            "min_repetitions": self.min_repetitions,
            "max_repetitions": self.max_repetitions,
            "confidence": self.confidence,
            "attempts": self.attempts,
            "attempt_alpha": self.alpha,
            "cells": self.cells,
            "looks": list(self.looks),
            "look_alphas": list(self.look_alphas),
            "pass_critical_t": list(self.pass_critical),
            "first_fail_critical_t": list(self.fail_critical(self.cells)),
            "method": PLAN_METHOD,
        }


@dataclass(frozen=True)
class LookOutcome:
    """Per row and cell: the verdict code, the index of the deciding (or last reached) look, and
    the margin interval at that look; `fail_critical` is the critical t a failed cell crossed;
    `pass_critical` the one its interval used, and `pooled` how many cells its sd was pooled
    over at that look (1: its own). Cells that reached no look have look -1 and NaN numbers."""

    verdict: np.ndarray
    look: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray
    fail_critical: np.ndarray
    pass_critical: np.ndarray
    pooled: np.ndarray


def t_interval(samples: np.ndarray, alpha: float, sd_floor: float = 0.0) -> tuple[np.ndarray, ...]:
    """Mean, sd (at least `sd_floor`) and the two-sided (1 - alpha) t interval, last axis."""
    size = samples.shape[-1]
    mean = samples.mean(axis=-1)
    sd = np.maximum(samples.std(axis=-1, ddof=1), sd_floor)
    half = stats.t.isf(alpha / 2, size - 1) * sd / math.sqrt(size)
    return mean, sd, mean - half, mean + half


def clause_margins(log_ratios: np.ndarray, change: str, bound_ratio: float) -> np.ndarray:
    """Log-ratios as distances from the clause bound, positive on the passing side.

    A reduction passes below its bound ratio; a gain or a ratio clause passes above it.
    """
    sign = -1.0 if change == "reduction" else 1.0
    return sign * (np.asarray(log_ratios, dtype=float) - math.log(bound_ratio))


@dataclass(frozen=True)
class LookSummary:
    """What the walk reads from one look's data, per row and cell: the mean margin, the
    variance to use (pooled where supported), how many cells it was pooled over, and which cells
    reached the look. Adding a constant to a cell's margins moves only `mean`, so a simulation
    can summarise its noise once and shift it to each true effect (common random numbers)."""

    size: int
    mean: np.ndarray
    variance: np.ndarray
    pool: np.ndarray
    reached: np.ndarray

    def shifted(self, margins: np.ndarray) -> LookSummary:
        return LookSummary(self.size, self.mean + margins, self.variance, self.pool, self.reached)


def summarize_looks(
    margins: np.ndarray,
    plan: SequentialPlan,
    *,
    counts: np.ndarray | None = None,
    groups: np.ndarray | None = None,
) -> list[LookSummary]:
    """The looks' summaries of margins shaped (rows, cells, repetitions); see decide_cells."""
    _, cells, available = margins.shape
    counts = np.full(cells, available) if counts is None else np.asarray(counts)
    summaries = []
    for size in plan.looks:
        reached = counts >= size
        if not reached.any():
            break
        window = np.where(reached[None, :, None], margins[:, :, :size], 0.0)
        variance, pool = pooled_variance(window, reached, groups)
        summaries.append(LookSummary(size, window.mean(axis=-1), variance, pool, reached))
    return summaries


def decide_cells(
    margins: np.ndarray,
    plan: SequentialPlan,
    *,
    sd_floor: float | np.ndarray = 0.0,
    counts: np.ndarray | None = None,
    groups: np.ndarray | None = None,
) -> LookOutcome:
    """Walk the planned looks over a gate's cells, shape (rows, cells, repetitions).

    A margin is the log-ratio's distance from the bar, positive on the passing side; `counts`
    says how many leading repetitions of each cell are real (the rest may be NaN). A cell passes
    at the first look where its t reaches the pass-side critical value; at each look the open
    cells whose t lies below minus the fail-side critical value fail in Holm's order (most
    extreme first, the family shrinking by one with each fail, over all looks). A decided cell
    keeps its verdict. Cells with the same `groups` id (>= 0: the tiers of one clause) share a
    pooled sd at a look where the data support it (gates.decisions.statistics.pooling).
    """
    summaries = summarize_looks(margins, plan, counts=counts, groups=groups)
    return walk_looks(summaries, plan, margins.shape[:2], sd_floor=sd_floor)


def walk_looks(
    summaries: list[LookSummary],
    plan: SequentialPlan,
    shape: tuple[int, int],
    *,
    sd_floor: float | np.ndarray = 0.0,
) -> LookOutcome:
    """decide_cells from the looks' summaries, shape (rows, cells)."""
    rows, cells = shape
    family = max(plan.cells, cells)
    floors = np.broadcast_to(np.asarray(sd_floor, dtype=float), (cells,))
    verdict = np.full((rows, cells), OPEN)
    look = np.full((rows, cells), -1)
    numbers = [np.full((rows, cells), np.nan) for _ in range(6)]
    pooled_at = np.ones((rows, cells), dtype=int)
    failed = np.zeros(rows, dtype=int)
    for index, summary in enumerate(summaries):
        mean, pool, reached = summary.mean, summary.pool, summary.reached
        sd = np.maximum(np.sqrt(summary.variance), floors)
        se = sd / math.sqrt(summary.size)
        critical = _pass_critical(plan, pool, index)
        still_open = (verdict == OPEN) & reached[None, :]
        found = (mean, sd, mean - critical * se, mean + critical * se, None, critical)
        for target, values in zip(numbers, found, strict=True):
            if values is not None:
                target[still_open] = values[still_open]
        look[still_open] = index
        pooled_at[still_open] = pool[still_open]
        verdict[still_open & (mean >= critical * se)] = PASS
        with np.errstate(divide="ignore", invalid="ignore"):  # sd 0 with no floor: t is +-inf
            t_values = np.where(verdict == OPEN, mean / se, np.inf)
        t_values[:, ~reached] = np.inf
        tables = _fail_tables(plan, pool, family, index)
        _holm_fail(t_values, tables, pool, family, failed, verdict, numbers[4])
    mean_at, sd_at, low_at, high_at, fail_at, pass_at = numbers
    return LookOutcome(
        verdict,
        look,
        mean_at,
        sd_at,
        low_at,
        high_at,
        fail_at,
        pass_critical=pass_at,
        pooled=pooled_at,
    )


def _pass_critical(plan: SequentialPlan, pool: np.ndarray, index: int) -> np.ndarray:
    critical = np.full(pool.shape, plan.pass_critical[index])
    for k in np.unique(pool[pool > 1]):
        critical[pool == k] = plan.pass_critical_pooled(int(k))[index]
    return critical


def _fail_tables(
    plan: SequentialPlan, pool: np.ndarray, family: int, index: int
) -> dict[int, np.ndarray]:
    """Per pool size: the fail-side critical value at this look for 1..family standing."""
    tables = {1: np.array([plan.fail_critical(m)[index] for m in range(1, family + 1)])}
    for k in np.unique(pool[pool > 1]):
        tables[int(k)] = np.array(
            [plan.fail_critical(m, int(k))[index] for m in range(1, family + 1)]
        )
    return tables


def _holm_fail(
    t_values: np.ndarray,
    tables: dict[int, np.ndarray],
    pool: np.ndarray,
    family: int,
    failed: np.ndarray,
    verdict: np.ndarray,
    used: np.ndarray,
) -> None:
    """Holm's step-down at one look: fail the most extreme open cell while it crosses the
    critical value for the hypotheses still standing; `failed` counts fails so far per row.
    Each cell is held to the critical value of its own degrees of freedom (pooled or not), so
    "most extreme" is the largest t relative to it; which crossing cell goes first does not
    change the set Holm fails, only the order."""
    rows = np.arange(t_values.shape[0])
    for _ in range(t_values.shape[1]):
        standing = np.clip(family - failed, 1, family)
        limits = np.zeros(t_values.shape)
        for k, table in tables.items():
            limits = np.where(pool == k, table[standing - 1][:, None], limits)
        with np.errstate(invalid="ignore"):
            relative = t_values / limits  # +inf marks a cell not standing
        worst = np.argmin(np.where(np.isnan(relative), np.inf, relative), axis=1)
        value, limit = t_values[rows, worst], limits[rows, worst]
        crossing = value <= -limit  # NaN never crosses
        if not crossing.any():
            return
        hit_rows, hit_cells = rows[crossing], worst[crossing]
        verdict[hit_rows, hit_cells] = FAIL
        used[hit_rows, hit_cells] = limit[crossing]
        t_values[hit_rows, hit_cells] = np.inf
        failed += crossing


def decide_sequentially(margins: np.ndarray, plan: SequentialPlan) -> LookOutcome:
    """One cell per row, shape (rows, repetitions): decide_cells with a family of plan.cells."""
    outcome = decide_cells(margins[:, np.newaxis, :], plan)
    return LookOutcome(*(values[:, 0] for values in vars(outcome).values()))


def pass_probability(size: int, critical: float, margin: float, sd: float) -> float:
    """Chance that one t statistic of `size` pairs reaches `critical` on the side of `margin`."""
    if margin == 0:
        return 0.0
    if sd <= 0:
        return 1.0
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
    """The smallest even repetitions.max whose final look alone decides with at least `power`.

    A true ratio on the passing side of the bound is then shown to pass, one on the failing
    side to fail (one cell, one attempt). Errs on the safe side: early looks add chances to
    decide. None when `limit` is not enough (or the true ratio sits exactly on the bound).
    """
    if true_ratio <= 0 or bound_ratio <= 0 or not math.isfinite(sd_log_ratio) or sd_log_ratio < 0:
        raise ValueError("ratios must be positive and the noise a finite non-negative number")
    margin = math.log(true_ratio) - math.log(bound_ratio)
    first = max(min_repetitions, 2)
    # The final look's critical value changes as the budget grows (earlier looks spend), so scan.
    for budget in range(first + first % 2, limit + 1, 2):
        plan = SequentialPlan(first, budget, confidence)
        # A sizing estimate: boundaries from fewer paths (the OC checks the plan it proposes).
        final = critical_values(plan.looks, budget, plan.alpha / 2, paths=DESIGN_PATHS)[-1]
        if pass_probability(budget, final, margin, sd_log_ratio) >= power:
            return budget
    return None
