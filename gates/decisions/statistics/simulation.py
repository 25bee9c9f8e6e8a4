"""Simulated G3 gates for the operating characteristic: arm-level lognormal noise, so cells that
share an arm at a tier (offload/baseline and recompute/offload) move together as in a real run;
the looks' summaries of one draw are shifted to each true effect (common random numbers), and
every probability carries its Wilson 95 % half-width. Pure: numpy only; imports no Django.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from documents.characteristic import HalfWidths, SimulatedOutcome
from gates.decisions.clauses import Clause, G3Terms
from gates.decisions.statistics.inference import (
    FAIL,
    OPEN,
    PASS,
    LookOutcome,
    LookSummary,
    SequentialPlan,
    summarize_looks,
    walk_looks,
)

WILSON_Z = 1.959963984540054  # 95 %


def wilson_half_width(share: float, draws: int) -> float:
    """Half the width of the Wilson 95 % interval of a simulated probability."""
    z2 = WILSON_Z**2
    spread = share * (1 - share) / draws + z2 / (4 * draws * draws)
    return float(WILSON_Z * math.sqrt(spread) / (1 + z2 / draws))


def cells_of(parsed: G3Terms) -> list[tuple[Clause, int]]:
    return [(clause, tier) for clause in parsed.clauses for tier in clause.tiers]


@dataclass(frozen=True)
class GateDraw:
    """One simulated attempt of a spec's cells at zero margin: the looks' summaries."""

    summaries: list[LookSummary]
    rows: int
    cells: int

    def walk(self, margins: np.ndarray, plan: SequentialPlan, floors: np.ndarray) -> LookOutcome:
        shifted = [summary.shifted(margins[None, :]) for summary in self.summaries]
        return walk_looks(shifted, plan, (self.rows, self.cells), sd_floor=floors)

    def scaled(self, factor: float) -> GateDraw:
        """The same draw at `factor` times the noise."""
        parts = [
            LookSummary(s.size, s.mean * factor, s.variance * factor**2, s.pool, s.reached)
            for s in self.summaries
        ]
        return GateDraw(parts, self.rows, self.cells)

    def subset(self, members: np.ndarray) -> GateDraw:
        parts = [
            LookSummary(
                s.size,
                s.mean[:, members],
                s.variance[:, members],
                s.pool[:, members],
                s.reached[members],
            )
            for s in self.summaries
        ]
        return GateDraw(parts, self.rows, len(members))


def draw_gate(
    parsed: G3Terms, plan: SequentialPlan, sd: float, gates: int, rng: np.random.Generator
) -> GateDraw:
    """One attempt's looks over noise margins drawn by `draw_margins`."""
    margins = draw_margins(parsed, plan.max_repetitions, sd, gates, rng)
    return summarize_draw(parsed, margins, plan)


def draw_margins(
    parsed: G3Terms, repetitions: int, sd: float, gates: int, rng: np.random.Generator
) -> np.ndarray:
    """Noise margins of every cell, shaped (gates, cells, repetitions), from arm-level noise:
    each (metric, arm, tier) has its own lognormal noise with sd of log sd / sqrt(2), so a
    cell's log-ratio has sd `sd`."""
    cells = cells_of(parsed)
    arm_sd = sd / math.sqrt(2)
    noise: dict[tuple[str, str, int], np.ndarray] = {}
    margins = np.empty((gates, len(cells), repetitions))
    for row, (clause, tier) in enumerate(cells):
        a, b = (
            noise.setdefault(key, rng.normal(0.0, arm_sd, (gates, repetitions)))
            for key in ((clause.metric, clause.a, tier), (clause.metric, clause.b, tier))
        )
        margins[:, row, :] = (-1.0 if clause.change == "reduction" else 1.0) * (a - b)
    return margins


def summarize_draw(parsed: G3Terms, margins: np.ndarray, plan: SequentialPlan) -> GateDraw:
    """The plan's looks over the first repetitions of `margins` (gates, cells, repetitions)."""
    groups = None
    if parsed.statistics.pool_tiers:
        groups = np.array([clause.index for clause, _ in cells_of(parsed)])
    gates, cells, _ = margins.shape
    return GateDraw(summarize_looks(margins, plan, groups=groups), gates, cells)


@dataclass(frozen=True)
class GateOutcome:
    """Per simulated gate: passed, failed, and the repetitions it used; by look (index) too."""

    passed: np.ndarray
    failed: np.ndarray
    repetitions: np.ndarray
    pass_look: np.ndarray  # the look the gate passed at, or a large number
    fail_look: np.ndarray


def gate_outcome(outcome: LookOutcome, plan: SequentialPlan) -> GateOutcome:
    """The gate stops at its first fail, or when its last cell passed; else it runs to max."""
    never = len(plan.looks)
    failed = (outcome.verdict == FAIL).any(axis=1)
    passed = (outcome.verdict == PASS).all(axis=1)
    fail_look = np.where(outcome.verdict == FAIL, outcome.look, never).min(axis=1)
    pass_look = np.where(passed, outcome.look.max(axis=1), never)
    looks = np.array([*plan.looks, plan.max_repetitions])
    used = np.where(failed, looks[fail_look], np.where(passed, looks[pass_look], looks[-1]))
    return GateOutcome(passed, failed, used, pass_look, fail_look)


def summarize(found: GateOutcome, outcome: LookOutcome | None = None) -> SimulatedOutcome:
    draws = found.passed.size
    passed, failed = float(found.passed.mean()), float(found.failed.mean())
    open_ = ~found.passed & ~found.failed
    if outcome is not None:
        open_ &= (outcome.verdict == OPEN).any(axis=1)
    inconclusive = float(open_.mean())
    widths: HalfWidths = {
        "pass": wilson_half_width(passed, draws),
        "fail": wilson_half_width(failed, draws),
        "inconclusive": wilson_half_width(inconclusive, draws),
    }
    return {
        "pass": passed,
        "fail": failed,
        "inconclusive": inconclusive,
        "repetitions": float(found.repetitions.mean()),
        "half_width_95": widths,
    }
