"""Suspicious spread in a G3 cell: the floor under its sd of log-ratios, and the validity check
that a spread implausibly low for the known noise fails. The reference noise of a cell is the
G2 A/A sd of log-ratios of its metric when the engagement measured it, else the sd the spec's
stated CV implies. Identical repetitions (copied values in distinct files) give sd 0 and a
verdict on one draw; a chi-square lower-tail test at `statistics.spread_level` names them.
Pure: numbers in, typed checks out; imports no Django.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from documents.cell import NoiseFloorContext, ValidityCheck
from gates.decisions.clauses import Clause, G3Terms


def sd_from_cv(cv_pct: float) -> float:
    """sd of log(A/B) when each arm has independent lognormal noise of this CV (percent)."""
    return math.sqrt(2 * math.log1p((cv_pct / 100) ** 2))


def cv_from_sd(sd_log_ratio: float) -> float:
    """The per-arm CV (percent) that gives this sd of log(A/B): sd_from_cv's inverse."""
    return 100 * math.sqrt(math.expm1(sd_log_ratio**2 / 2))


def reference_noise(
    parsed: G3Terms, clause: Clause, measured: NoiseFloorContext | None
) -> float | None:
    """The noise a cell's spread is judged against: G2's for its metric, else the stated CV's."""
    if measured is not None and measured["metric"] == clause.metric:
        return measured["sd_log_ratio"]
    cv = parsed.statistics.noise_cv_pct
    return None if cv is None else sd_from_cv(cv)


def sd_floor(parsed: G3Terms, clause: Clause, measured: NoiseFloorContext | None) -> float:
    """The floor under a cell's sd: the spec's resolution `sd_floor`, raised to
    `sd_floor_fraction` of the reference noise; a spec without the fraction (written before
    it) keeps the whole G2 noise of the same metric as its floor."""
    rules = parsed.statistics
    if rules.sd_floor_fraction is None:
        same = measured is not None and measured["metric"] == clause.metric
        return max(rules.sd_floor, measured["sd_log_ratio"] if measured and same else 0.0)
    reference = reference_noise(parsed, clause, measured)
    return max(rules.sd_floor, rules.sd_floor_fraction * (reference or 0.0))


def spread_check(
    clause: Clause, tier: int, log_ratios: list[float], reference: float | None, level: float
) -> ValidityCheck | None:
    """Invalid when the cell's variance is implausibly low for the reference noise: under it,
    (n - 1) s^2 / sd^2 is chi-square(n - 1), and a lower tail below `level` says the repetitions
    did not vary as independent measurements do (copied or synthetic values)."""
    size = len(log_ratios)
    if reference is None or reference <= 0 or size < 3:
        return None
    sd = float(np.std(log_ratios, ddof=1))
    tail = float(stats.chi2.cdf((size - 1) * sd * sd / (reference * reference), size - 1))
    ok = tail >= level
    where = f"{clause.metric} {clause.compare} at tier {tier}"
    why = (
        f"{where}: sd of log-ratios {sd:.4g} over {size} repetitions against noise "
        f"{reference:.4g} (chi-square lower tail {tail:.2g}, limit {level:g})"
    )
    if not ok:
        why += ": a spread implausibly low for the measured noise"
    return {
        "check": "spread",
        "arm": clause.compare,
        "tier": tier,
        "repetition": None,
        "observed": sd,
        "limit": level,
        "ok": ok,
        "reason": why,
    }
