"""Issue 26: a verdict that a good product can earn and that nobody can buy. The shipped G3
template is decisive at its own stated noise, its boundaries realise at most the declared level,
the engagement's budget holds under cancels, resets and carried repetitions, and copied or
implausibly quiet repetitions make a run invalid. Seeded and vectorized; every tolerance is the
simulation's own sampling error (three binomial sd, or the Wilson 95 % half-width the OC
reports)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gates.decisions import EvidenceError, decide_g3
from gates.decisions.clauses import log_ratio_terms, parse_g3_spec
from gates.decisions.statistics.boundaries import critical_values, null_t_statistics
from gates.decisions.statistics.budget import (
    attempt_plan,
    attempt_spent,
    error_budget,
    reset_cost,
)
from gates.decisions.statistics.inference import FAIL, OPEN, PASS, clause_margins, decide_cells
from gates.decisions.statistics.operating import cell_floors, gate_plan, operating_characteristic
from gates.decisions.statistics.signing import repetitions_for_power, signing_check
from gates.decisions.statistics.simulation import (
    cells_of,
    draw_margins,
    gate_outcome,
    summarize_draw,
)
from gates.decisions.statistics.spread import sd_from_cv
from gates.specs.validation import default_spec
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, measurement, paired

TEMPLATE = default_spec("G3")
PARSED = parse_g3_spec(TEMPLATE)
PER_SIDE = (1 - PARSED.confidence) / 2


def three_sd(rate: float, draws: int) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / draws)


@pytest.fixture(scope="module")
def template_oc():
    return operating_characteristic(TEMPLATE, gates=20_000, seed=2601)


def test_the_template_claims_lie_strictly_above_their_bars_with_a_stated_noise_and_source():
    for clause in PARSED.clauses:
        assert clause.claimed is not None and clause.claimed > clause.threshold
    rules = TEMPLATE["statistics"]
    assert rules["noise_cv_pct"] > 0 and "G2" in rules["noise_source"]
    assert rules["require_power"] is True


def test_the_template_passes_at_least_80_percent_at_its_claims_and_its_stated_noise(template_oc):
    at_claims = template_oc["gate"]["at_claims"]
    width = at_claims["half_width_95"]["pass"]
    assert width <= 0.006  # 20,000 gates: the figure is resolved to about half a point
    assert at_claims["pass"] - width >= 0.80, at_claims
    assert not template_oc["warnings"]


def test_the_template_at_its_bars_fails_and_passes_at_most_the_declared_rate(template_oc):
    draws = template_oc["simulated_gates"]
    per_attempt = PER_SIDE / PARSED.statistics.attempts
    at_bars = template_oc["gate"]["at_bars"]
    assert at_bars["fail"] <= per_attempt + three_sd(per_attempt, draws)
    assert at_bars["pass"] <= per_attempt + three_sd(per_attempt, draws)


def test_over_the_engagement_no_cancel_policy_buys_a_pass_and_a_reset_adds_what_it_says(
    template_oc,
):
    draws = template_oc["simulated_gates"]
    rows = template_oc["gate"]["lifetime"]
    assert {row["policy"] for row in rows} >= {
        "honest",
        "cancel_before_first_look",  # each cancel spends: the row holds the declared rate too
        "cancel_after_first_look",
        "one_reset",
    }
    for row in rows:
        assert row["pass"] <= row["declared"] + three_sd(row["declared"], draws), row
        assert row["fail"] <= row["declared"] + three_sd(row["declared"], draws), row
    honest = next(r for r in rows if r["policy"] == "honest" and "one cell" in r["scenario"])
    assert honest["pass"] > PER_SIDE / 2  # the check above could fail: the bound is nearly used


def test_the_template_repetitions_are_what_the_sample_size_search_picks_at_the_stated_noise():
    needed = repetitions_for_power(PARSED, sd_from_cv(TEMPLATE["statistics"]["noise_cv_pct"]), 0.8)
    assert needed is not None and needed <= PARSED.max_repetitions <= needed + 4


@pytest.mark.parametrize("level", [0.025, 0.003125])
def test_the_boundaries_realise_at_most_the_declared_level_on_fresh_null_paths(level):
    """4.2 million paths of their own resolve the level to 3 sd = 2.6 % of 0.3125 %: the 7 %
    excess of the old 2^18-path boundaries would show as 8 sd."""
    looks, draws = (4, 6, 8), 2**22
    crossed = (
        null_t_statistics(looks, 1, draws, np.random.default_rng(7))
        >= np.array(critical_values(looks, 8, level), dtype=np.float32)
    ).any(axis=1)
    realised = float(crossed.mean())
    assert realised <= level + three_sd(level, draws)
    assert realised >= level * 0.95  # conservative by its Monte Carlo error only, not more


def test_the_budget_counts_every_attempt_with_a_complete_repetition_whatever_ended_it():
    # canceled after one repetition (before the first look), invalid after 20, failed before any
    assert PARSED.min_repetitions > 1
    budget = error_budget(PARSED, [1, 20, 0])
    assert budget["attempts_spent"] == 2 and budget["attempts_left"] == 0
    assert budget["next_attempt"] is None
    assert budget["error_spent"] == pytest.approx(PER_SIDE)
    fresh = error_budget(PARSED, [0, 0, 0])  # infrastructure failures before any data
    assert fresh["next_attempt"] == 1 and fresh["attempts_left"] == 2


def test_peeking_and_canceling_before_the_first_look_buys_no_fresh_attempt():
    """Watch repetitions 1..min-1, cancel when they look weak, restart: each restart spends."""
    assert attempt_spent(1) and not attempt_spent(0)
    peeks = list(range(1, PARSED.min_repetitions))  # canceled after 1, 2, ... repetitions
    budget = error_budget(PARSED, peeks)
    assert budget["attempts_spent"] == len(peeks) and budget["attempts_left"] == 0


def test_a_reset_states_the_lifetime_error_it_adds_before_it_is_signed():
    cost = reset_cost(PARSED, resets_so_far=0)
    assert cost["lifetime_after"] == pytest.approx(2 * PER_SIDE)
    after = error_budget(PARSED, [1, 1], resets=1)
    assert after["attempts_left"] == 2 and after["next_attempt"] == 1
    assert after["lifetime_error"] == pytest.approx(cost["lifetime_after"])


def test_the_template_is_signable_at_its_stated_noise_and_a_noisy_host_gets_proposals():
    assert signing_check(TEMPLATE, gates=4000)["signable"] is True
    noisy = signing_check(TEMPLATE, sd_log_ratio=sd_from_cv(8), gates=4000)
    assert noisy["signable"] is False and noisy["proposals"]
    kinds = {proposal["kind"] for proposal in noisy["proposals"]}
    assert "prompts" in kinds or "repetitions" in kinds


def spread_rows(offload_ratios: list[float], baselines: list[float]) -> list[dict]:
    rows = []
    for rep, (base, ratio) in enumerate(zip(baselines, offload_ratios, strict=True), start=1):
        rows.append(measurement("baseline", rep, base))
        rows.append(measurement("offload", rep, base * ratio))
    return rows


SPREAD_SPEC = g3_spec(
    statistics={"noise_cv_pct": 4, "sd_floor_fraction": 0.5, "spread_level": 0.001}
)


def test_identical_values_in_two_repetitions_make_the_run_invalid_naming_both():
    rows = spread_rows([0.7, 0.71, 0.69, 0.72], [1000.0, 1010.0, 990.0, 1000.0])
    result = decide_g3(SPREAD_SPEC, rows, CONTEXT)
    assert result["verdict"] == "invalid"
    (reason,) = [r for r in result["reasons"] if "exactly the value" in r]
    assert "baseline tier 8 repetition 4" in reason and "repetition 1" in reason


def test_a_spread_implausibly_low_for_the_stated_noise_makes_the_run_invalid():
    bases = [1000.0 + rep for rep in range(8)]
    quiet = [0.7 * (1 + 1e-4 * (-1) ** rep) for rep in range(8)]
    result = decide_g3(SPREAD_SPEC, spread_rows(quiet, bases), CONTEXT)
    assert result["verdict"] == "invalid"
    assert any("implausibly low" in reason for reason in result["reasons"])


def test_honest_noise_passes_the_spread_check_and_the_floor_is_half_the_stated_noise():
    rng = np.random.default_rng(26)
    ratios = list(0.6 * np.exp(rng.normal(0, sd_from_cv(4), 8)))
    bases = [1000.0 + rep for rep in range(8)]
    result = decide_g3(SPREAD_SPEC, spread_rows(ratios, bases), CONTEXT)
    assert result["verdict"] == "pass"
    assert next(c for c in result["validity"] if c["check"] == "spread")["ok"] is True
    assert result["clauses"][0]["sd_floor"] == pytest.approx(0.5 * sd_from_cv(4))


# Repetitions carried into the next attempt (statistics.carry_repetitions): the attempt's
# looks continue on the union at its own share of the budget.
CARRYING = {"attempts": 2, "carry_repetitions": True}


def test_a_carrying_attempt_looks_at_the_union_from_the_next_look_on():
    """Eight repetitions carried (looks 4, 6, 8 spent): the attempt's looks are 12, 14, 16, and
    with 4 more it decides on all twelve pairs."""
    spec = g3_spec(statistics=CARRYING)
    ratios = [0.60, 0.62, 0.59, 0.61] * 3
    carrying = {**CONTEXT, "attempt": 2, "carried_repetitions": 8}
    early = decide_g3(spec, paired(ratios[:10]), carrying)
    assert early["inputs"]["plan"]["looks"] == [12, 14, 16]
    assert early["plan"] == {
        "action": "run",
        "more": 2,
        "reason": "1 clause cell(s) undecided after 10 repetition(s); run 2 more",
    }
    result = decide_g3(spec, paired(ratios), carrying)
    (cell,) = result["clauses"]
    assert result["verdict"] == "pass" and cell["n"] == 12
    assert result["inputs"]["context"]["carried_repetitions"] == 8


def test_carried_repetitions_need_a_spec_that_carries_them():
    with pytest.raises(EvidenceError, match="does not carry repetitions"):
        decide_g3(g3_spec(), paired([0.6] * 8), {**CONTEXT, "carried_repetitions": 4})


def test_carrying_keeps_the_engagement_false_pass_and_fail_within_the_declared_rate():
    """The shipped template (looks 8, 18, 28; 2 attempts of 2.5 % per side; 8 cells) at its
    stated noise, one cell at its bar: every gate inconclusive after its first attempt carries
    its 28 repetitions into a second whose looks are 36, 46, 56 on the union. Ever passed and
    ever failed over the engagement stay within the declared 5 % per side."""
    parsed = parse_g3_spec({**default_spec("G3")})
    gates, declared = 20_000, (1 - parsed.confidence) / 2
    rng = np.random.default_rng(26)
    first, second = attempt_plan(parsed, 8), attempt_plan(parsed, 8, parsed.max_repetitions)
    assert second.looks == (36, 46, 56)
    logs = math.log(0.75) + rng.normal(0, sd_from_cv(4), (gates, 1, second.max_repetitions))
    margins = clause_margins(logs, "reduction", 0.75)
    floor = parsed.statistics.sd_floor
    once = decide_cells(margins[..., : first.max_repetitions], first, sd_floor=floor).verdict[:, 0]
    again = decide_cells(margins, second, sd_floor=floor).verdict[:, 0]
    carried = once == OPEN
    for side in (PASS, FAIL):
        ever = ((once == side) | (carried & (again == side))).mean()
        assert ever <= declared + 3 * math.sqrt(declared * (1 - declared) / gates), (side, ever)
    assert carried.mean() > 0.9  # nearly every gate at its bar carries into the second attempt


def test_the_lifetime_rows_model_carrying_and_stay_within_the_declared_rate():
    """The template with carry_repetitions: the OC's lifetime rows carry each inconclusive
    attempt's repetitions into the next. At one cell on its bar the honest team's ever-pass
    agrees with the engine-level simulation above (3.97 %, within this run's sampling error),
    lies below re-running afresh (4.85 % in the rows without carrying), and no row exceeds
    what the spec declares."""
    spec = {**TEMPLATE, "statistics": {**TEMPLATE["statistics"], **CARRYING}}
    carried = operating_characteristic(spec, gates=20_000, seed=2603)
    rows = carried["gate"]["lifetime"]
    draws = carried["simulated_gates"]
    for row in rows:
        assert "carries its repetitions" in row["policy_text"], row
        assert row["pass"] <= row["declared"] + three_sd(row["declared"], draws), row
        assert row["fail"] <= row["declared"] + three_sd(row["declared"], draws), row
    by = {(r["scenario"].split(",")[0], r["policy"]): r for r in rows}
    honest = by[("one cell at its bar", "honest")]
    assert abs(honest["pass"] - 0.0397) <= three_sd(0.0397, draws) + three_sd(0.0397, 20_000)
    fresh = operating_characteristic(TEMPLATE, gates=20_000, seed=2603)["gate"]["lifetime"]
    afresh = next(r for r in fresh if r["policy"] == "honest" and "one cell" in r["scenario"])
    assert honest["pass"] < afresh["pass"]
    # Canceling after the first look leaves nothing inconclusive to carry: nothing changes.
    canceled = by[("one cell at its bar", "cancel_after_first_look")]
    assert canceled["pass"] == 0.0 and canceled["attempts"] == pytest.approx(2.0)


PEEK = 2  # repetitions a team watches before it decides to cancel (the first look is at 8)


Try = tuple[np.ndarray, np.ndarray, np.ndarray]  # per gate: passed, failed, ran on


def peeked_tries(tries: int, gates: int, seed: int) -> list[Try]:
    """`tries` fresh attempts of the template at its stated noise, one cell at its bar and the
    others certain to pass: per gate, passed, failed, and whether the at-bar cell's mean over
    its first PEEK repetitions is in its top quarter (the team runs on only then)."""
    parsed = log_ratio_terms(PARSED)
    sd = sd_from_cv(TEMPLATE["statistics"]["noise_cv_pct"])
    plan, floors = gate_plan(parsed), cell_floors(parsed, None)
    margins = np.full(len(cells_of(parsed)), 10 * sd)
    margins[0] = 0.0
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(tries):
        noise = draw_margins(parsed, plan.max_repetitions, sd, gates, rng)
        outcome = gate_outcome(
            summarize_draw(parsed, noise, plan).walk(margins, plan, floors), plan
        )
        # The peek's mean has sd sd / sqrt(PEEK); its upper quartile starts at 0.674 of that.
        liked = noise[:, 0, :PEEK].mean(axis=1) > 0.674 * sd / math.sqrt(PEEK)
        found.append((outcome.passed & liked, outcome.failed & liked, liked))
    return found


def ever_passed(tries: list[Try], *, cancels_spend: bool) -> float:
    """A team that cancels every attempt it did not like at the peek and starts another: with
    `cancels_spend` each start spends an attempt; without, only the attempts it ran on do."""
    attempts = PARSED.statistics.attempts
    gates = tries[0][0].size
    ever, spent = np.zeros(gates, dtype=bool), np.zeros(gates, dtype=int)
    for passed, failed, liked in tries:
        trying = ~ever & (spent < attempts)
        ever |= trying & passed
        spent += trying & (liked | cancels_spend)
        spent[trying & failed] = attempts  # a fail ends the gate
    return float(ever.mean())


def test_canceling_weak_interim_repetitions_before_the_first_look_buys_no_pass():
    """The exploit of issue 26 item 2, at the template's stated noise with one cell at its bar:
    were a cancel before the first look free, watching 2 repetitions and restarting every run
    that did not look good would pass far beyond the declared 5 % (by 10 of its sd); since
    every attempt with a complete repetition spends, the same team stays within it."""
    assert attempt_spent(PEEK) and PARSED.min_repetitions > PEEK
    gates = 10_000
    tries = peeked_tries(12, gates, seed=2602)
    honest_bound = PER_SIDE + three_sd(PER_SIDE, gates)
    assert ever_passed(tries, cancels_spend=True) <= honest_bound  # measured 2.4 %
    assert ever_passed(tries, cancels_spend=False) > honest_bound  # 8.6 %: the rule matters
