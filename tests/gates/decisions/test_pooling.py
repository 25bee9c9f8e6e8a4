"""Pooling a clause's sd across its tiers: known effect, known noise, false-pass rate measured
by simulation (seeded, vectorized), beside deciding each tier on its own sd."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gates.decisions.g3 import decide_g3
from gates.decisions.statistics.boundaries import critical_values
from gates.decisions.statistics.inference import FAIL, PASS, SequentialPlan, decide_cells
from gates.decisions.statistics.pooling import pooled_variance, pooling_supported
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, paired, valid

DRAWS = 4000
# One attempt at confidence 0.90: each side may err 5 %; three binomial sd of slack.
DECLARED = 0.05
SLACK = 3 * math.sqrt(DECLARED * (1 - DECLARED) / DRAWS)
PLAN = SequentialPlan(4, 8, 0.90, attempts=1, cells=3)
TIERS = np.array([0, 0, 0])  # one clause at three tiers


def tier_margins(seed: int, margin_sd: float, sds=(1.0, 1.0, 1.0), rho: float = 0.0):
    """(DRAWS, 3 tiers, 8 repetitions) margins: true margin `margin_sd` sd of one log-ratio
    (sd 0.1), each tier's own noise scaled by `sds`, correlated `rho` between tiers."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal((DRAWS, 1, 8))
    own = rng.standard_normal((DRAWS, 3, 8))
    noise = math.sqrt(rho) * shared + math.sqrt(1 - rho) * own
    return 0.1 * (noise * np.array(sds)[None, :, None] + margin_sd)


def rates(margins, groups):
    outcome = decide_cells(margins, PLAN, groups=groups)
    first = outcome.verdict[:, 0]
    return (first == PASS).mean(), (first == FAIL).mean(), outcome


def test_pooled_boundaries_are_smaller_and_one_cell_keeps_the_old_ones():
    own = critical_values((4, 6, 8), 8, 0.025)
    pooled = critical_values((4, 6, 8), 8, 0.025, pool=3)
    assert all(p < o for p, o in zip(pooled, own, strict=True))
    assert critical_values((4, 6, 8), 8, 0.025, pool=1) == own


def test_at_the_bar_with_alike_independent_tiers_pooling_keeps_the_declared_rate():
    passed, failed, outcome = rates(tier_margins(101, 0.0), TIERS)
    assert (outcome.pooled > 1).mean() > 0.5  # the data supported pooling in most draws
    assert passed <= DECLARED + SLACK
    assert failed <= DECLARED + SLACK


def test_a_known_effect_is_shown_more_often_with_the_pooled_sd():
    margins = tier_margins(202, 1.0)
    pooled, _, _ = rates(margins, TIERS)
    alone, _, _ = rates(margins, None)
    assert pooled > alone + 0.01, (pooled, alone)


def test_tiers_that_move_together_are_never_pooled():
    _, _, outcome = rates(tier_margins(303, 0.0, rho=1.0), TIERS)
    assert (outcome.pooled == 1).all()


def test_a_noisier_tier_at_its_bar_passes_a_little_above_the_declared_rate():
    # With 4 repetitions no test tells a tier 1.5 times noisier than its neighbours; the
    # larger of the pooled and its own variance bounds the damage (docs/decisions.md).
    passed, _, _ = rates(tier_margins(404, 0.0, sds=(1.5, 1.0, 1.0)), TIERS)
    alone, _, _ = rates(tier_margins(404, 0.0, sds=(1.5, 1.0, 1.0)), None)
    assert alone <= DECLARED + SLACK
    assert passed <= 0.09


def test_unequal_spreads_are_not_pooled():
    window = np.array([[[1.0, -1.0, 1.0, -1.0], [0.1, -0.1, 0.1, -0.1], [5.0, -5.0, 5.0, -5.0]]])
    assert not pooling_supported(window)[0]
    variance, pool = pooled_variance(window, np.array([True] * 3), TIERS)
    assert (pool == 1).all() and variance[0, 1] == pytest.approx(0.04 / 3)


def test_decide_g3_pools_a_clauses_tiers_only_when_the_spec_says_so():
    ratios = {
        4: [0.60, 0.66, 0.62, 0.64],
        8: [0.65, 0.61, 0.59, 0.63],
        16: [0.62, 0.60, 0.66, 0.64],
    }
    items = [row for tier, values in ratios.items() for row in paired(values, tier=tier)]
    spec = g3_spec(tiers=[4, 8, 16])
    plain = decide_g3(spec, items, CONTEXT)
    pooled = decide_g3(valid("G3", {**spec, "statistics": {"pool_tiers": True}}), items, CONTEXT)
    assert [c["log_ratio"]["sd_pooled_over"] for c in plain["clauses"]] == [1, 1, 1]
    assert [c["log_ratio"]["sd_pooled_over"] for c in pooled["clauses"]] == [3, 3, 3]
    for alone, shared in zip(plain["clauses"], pooled["clauses"], strict=True):
        assert shared["log_ratio"]["t_quantile"] < alone["log_ratio"]["t_quantile"]
        assert shared["low"] > alone["low"]  # a narrower interval from the same data
