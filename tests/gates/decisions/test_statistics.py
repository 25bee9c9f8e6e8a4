"""Statistical tests of the G3 engine on synthetic repetitions with known truth (seeded, fast).

Noise is lognormal per arm and per repetition with a coefficient of variation of 5-15 %; the
offload/baseline ratio of one repetition therefore carries the noise of both arms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from gates.decisions import decide_g3
from gates.decisions.clauses import parse_g3_spec
from gates.decisions.statistics.inference import (
    FAIL,
    PASS,
    SequentialPlan,
    clause_margins,
    decide_sequentially,
    repetitions_needed,
)
from tests.gates.decisions.test_g3 import g3_spec, measurement

SIMULATED_GATES = 20000  # Monte Carlo sd of a 5 % rate: 0.0015
MARGIN_5PCT = 3 * math.sqrt(0.05 * 0.95 / SIMULATED_GATES)  # three binomial sd
THRESHOLD_RATIO = 0.75  # the spec's 25 % reduction clause


def simulate_log_ratios(rng, true_ratio, cvs, repetitions) -> np.ndarray:
    """Per-repetition log(offload / baseline) with independent lognormal noise on each arm."""
    sigma = np.sqrt(np.log1p(np.asarray(cvs) ** 2))[:, None]
    shape = (len(cvs), repetitions)
    offload = rng.normal(-(sigma**2) / 2, sigma, shape)
    baseline = rng.normal(-(sigma**2) / 2, sigma, shape)
    return math.log(true_ratio) + offload - baseline


def engine_rates(log_ratios: np.ndarray, plan) -> tuple[float, float, float]:
    outcome = decide_sequentially(clause_margins(log_ratios, "reduction", THRESHOLD_RATIO), plan)
    passed = float(np.mean(outcome.verdict == PASS))
    failed = float(np.mean(outcome.verdict == FAIL))
    return passed, failed, 1 - passed - failed


def spec_plan() -> SequentialPlan:
    spec = parse_g3_spec(g3_spec())
    return SequentialPlan(spec.min_repetitions, spec.max_repetitions, spec.confidence)


@dataclass(frozen=True)
class EveryLookAtFullAlpha:
    """What a naive sequential gate does: look after every repetition at the full alpha."""

    looks: tuple[int, ...] = (3, 4, 5, 6, 7, 8)
    cells: int = 1

    @property
    def pass_critical(self) -> tuple[float, ...]:
        return tuple(float(stats.t.isf(0.05, size - 1)) for size in self.looks)

    def fail_critical(self, open_hypotheses: int) -> tuple[float, ...]:
        return self.pass_critical


def test_an_aa_comparison_passes_a_25_percent_reduction_clause_at_most_5_percent_of_the_time():
    rng = np.random.default_rng(20260101)
    cvs = rng.uniform(0.05, 0.15, SIMULATED_GATES)
    passed, failed, _ = engine_rates(simulate_log_ratios(rng, 1.0, cvs, 8), spec_plan())
    assert passed <= 0.05
    assert failed >= 0.95  # with no effect at all the clause is shown to fail


@pytest.mark.parametrize("cv", [0.05, 0.10, 0.15])
def test_a_true_effect_exactly_at_the_threshold_is_mostly_inconclusive(cv):
    rng = np.random.default_rng(7 + int(cv * 100))
    cvs = np.full(SIMULATED_GATES, cv)
    passed, failed, open_ = engine_rates(simulate_log_ratios(rng, 0.75, cvs, 8), spec_plan())
    # 0.90 two-sided: at most 5 % on each side over all looks together
    assert passed <= 0.05 + MARGIN_5PCT and failed <= 0.05 + MARGIN_5PCT
    assert open_ >= 0.88


def test_looking_after_every_repetition_without_a_correction_would_break_the_declared_rate():
    """The check above can fail: the naive plan passes a threshold-level effect far too often."""
    rng = np.random.default_rng(99)
    log_ratios = simulate_log_ratios(rng, 0.75, np.full(SIMULATED_GATES, 0.10), 8)
    passed, failed, _ = engine_rates(log_ratios, EveryLookAtFullAlpha())
    assert passed > 0.08 and failed > 0.08


def test_a_true_40_percent_reduction_at_10_percent_noise_passes_95_percent_within_the_budget():
    rng = np.random.default_rng(40)
    log_ratios = simulate_log_ratios(rng, 0.60, np.full(SIMULATED_GATES, 0.10), 8)
    passed, failed, _ = engine_rates(log_ratios, spec_plan())
    assert passed >= 0.95
    assert failed == 0.0


def test_the_single_run_fixed_percentage_rule_passes_and_fails_on_noise():
    """Side by side on the same data: one run per arm, pass if the observed reduction >= 25 %."""
    rng = np.random.default_rng(5)
    at_threshold = simulate_log_ratios(rng, 0.75, np.full(SIMULATED_GATES, 0.10), 8)
    naive_pass = float(np.mean(at_threshold[:, 0] <= math.log(0.75)))
    engine_pass, _, _ = engine_rates(at_threshold, spec_plan())
    assert 0.4 < naive_pass < 0.6  # a coin flip either way
    assert engine_pass < naive_pass / 8


def test_the_power_estimate_is_met_by_the_sequential_plan_it_recommends():
    sd = math.sqrt(2 * math.log1p(0.10**2))
    budget = repetitions_needed(
        true_ratio=0.60,
        bound_ratio=0.75,
        sd_log_ratio=sd,
        confidence=0.90,
        min_repetitions=4,
        power=0.9,
    )
    assert budget is not None and 4 <= budget <= 8
    rng = np.random.default_rng(11)
    log_ratios = simulate_log_ratios(rng, 0.60, np.full(SIMULATED_GATES, 0.10), budget)
    passed, _, _ = engine_rates(log_ratios, SequentialPlan(4, budget, 0.90))
    assert passed >= 0.9


def test_the_power_estimate_needs_more_repetitions_for_smaller_margins_and_none_at_the_bound():
    sd = 0.14
    needs = [
        repetitions_needed(
            true_ratio=ratio, bound_ratio=0.75, sd_log_ratio=sd, confidence=0.90, min_repetitions=3
        )
        for ratio in (0.5, 0.6, 0.68)
    ]
    assert needs[0] < needs[1] < needs[2]
    assert (
        repetitions_needed(
            true_ratio=0.75, bound_ratio=0.75, sd_log_ratio=sd, confidence=0.9, min_repetitions=3
        )
        is None
    )
    # a true effect on the failing side needs repetitions to show the fail, too
    assert (
        repetitions_needed(
            true_ratio=0.95, bound_ratio=0.75, sd_log_ratio=sd, confidence=0.9, min_repetitions=3
        )
        is not None
    )


def test_the_plan_looks_at_even_counts_and_spends_exactly_the_declared_budget_per_side():
    plan = spec_plan()
    assert plan.looks == (4, 6, 8)
    # Own null data (not the boundaries' seed): a cell at its bar crosses the pass side 5 %
    # of the time over all looks, within the binomial margin, and not far less (no waste).
    rng = np.random.default_rng(404)
    margins = rng.normal(0.0, 0.2, (SIMULATED_GATES, 8))
    crossed = np.zeros(SIMULATED_GATES, dtype=bool)
    for size, critical in zip(plan.looks, plan.pass_critical, strict=True):
        window = margins[:, :size]
        t = window.mean(axis=1) / (window.std(axis=1, ddof=1) / math.sqrt(size))
        crossed |= t >= critical
    assert abs(crossed.mean() - 0.05) <= MARGIN_5PCT
    assert plan.pass_critical[0] > plan.pass_critical[-1]  # early looks spend little


def test_the_full_engine_agrees_with_the_vectorized_simulation():
    """decide_g3 on dict measurements reaches the same verdicts as the path the tests simulate."""
    rng = np.random.default_rng(3)
    truths = rng.choice([0.6, 0.7, 0.75, 0.8, 1.0], size=150)
    log_ratios = np.vstack([simulate_log_ratios(rng, truth, [0.10], 8)[0] for truth in truths])
    expected = decide_sequentially(
        clause_margins(log_ratios, "reduction", THRESHOLD_RATIO), spec_plan()
    ).verdict
    names = {PASS: "pass", FAIL: "fail", 0: "inconclusive"}
    for row, code in zip(log_ratios, expected, strict=True):
        rows = []
        for rep, log_ratio in enumerate(row, start=1):
            base = 1000.0 + rep  # distinct per repetition: a repeated value is a copy
            rows.append(measurement("baseline", rep, base))
            rows.append(measurement("offload", rep, base * math.exp(log_ratio)))
        result = decide_g3(g3_spec(), rows, {"kv_exceeds_vram": True})
        assert result["clauses"][0]["verdict"] == names[int(code)]
