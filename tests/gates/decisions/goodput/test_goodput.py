"""Goodput: one bench's share of requests within an SLO (vLLM's TPOT rules), and the G3 floor
cell decided on it, with seeded simulations of its false-pass rate and power."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gates.decisions import decide_g3
from gates.decisions.goodput import BenchShare, Slo, bench_goodput, request_tpot
from gates.decisions.statistics.inference import FAIL, PASS, SequentialPlan, decide_cells
from gates.decisions.statistics.shares import binomial_sd_floor, margin_to_share, share_margins
from tests.gates.decisions.test_g3 import g3_spec, measurement

SLO = Slo(ttft_ms=2000, tpot_ms=50)


def requests(ttft: list, e2el: list | None = None, out: list | None = None) -> dict:
    found = {"ttft_ms": ttft}
    if e2el is not None:
        found["e2el_ms"] = e2el
    if out is not None:
        found["output_tokens"] = out
    return found


def test_tpot_is_vllms_latency_after_the_first_token_over_the_tokens_after_it():
    assert request_tpot(100.0, 1100.0, 21) == pytest.approx(50.0)
    assert request_tpot(100.0, 100.0, 1) == 0.0  # one token: no TPOT, meets any bound
    assert request_tpot(100.0, None, 21) is None


AIPERF = Path(__file__).resolve().parents[3] / "fixtures" / "aiperf"


def aiperf_requests(name: str) -> dict:
    """The per-request numbers of a real AIPerf capture, as its adapter normalizes them."""
    found = json.loads(
        (AIPERF / f"aiperf-0.13.0_profile_completions_{name}.records.expected.json").read_text()
    )
    return found["per_request"] if "per_request" in found else found["runs"][0]["per_request"]


def test_the_tpot_agrees_with_aiperfs_own_inter_token_latency_on_a_real_capture():
    found = aiperf_requests("c2_vs_simhost")
    rows = zip(
        found["ttft_ms"], found["e2el_ms"], found["output_tokens"], found["tpot_ms"], strict=True
    )
    for ttft, e2el, tokens, tpot in rows:
        assert request_tpot(ttft, e2el, tokens) == pytest.approx(tpot, rel=1e-9)


def test_a_real_capture_with_failed_requests_counts_them_against_the_share():
    found = aiperf_requests("c4_errors_vs_simhost")
    assert (found["count"], found["errors"]) == (16, 5)
    assert bench_goodput(found, Slo(ttft_ms=60_000, tpot_ms=1_000)) == BenchShare(11, 16)


def test_a_request_meets_the_slo_only_within_every_bound_inclusive():
    per_request = requests(
        ttft=[2000.0, 2000.1, 100.0, 100.0],
        e2el=[2000.0 + 50 * 10, 2100.0, 100.0 + 50.1 * 10, 100.0 + 50 * 10],
        out=[11, 2, 11, 11],
    )
    assert bench_goodput(per_request, SLO) == BenchShare(met=2, requests=4)


def test_failed_requests_count_against_the_share():
    per_request = requests(ttft=[100.0, None, 100.0], e2el=[200.0, None, 200.0], out=[3, 0, 3])
    assert bench_goodput(per_request, SLO) == BenchShare(met=2, requests=3)


def test_a_one_token_output_meets_a_tpot_bound_vacuously_and_a_missing_count_does_not():
    per_request = requests(ttft=[100.0, 100.0], e2el=[5000.0, 5000.0], out=[1, None])
    assert bench_goodput(per_request, Slo(tpot_ms=1)) == BenchShare(met=1, requests=2)


def test_a_ttft_only_slo_reads_only_ttfts():
    assert bench_goodput(requests(ttft=[1.0, 3000.0]), Slo(ttft_ms=2000)) == BenchShare(1, 2)


@pytest.mark.parametrize(
    ("per_request", "said"),
    [
        (None, "keeps no per-request numbers"),
        (requests(ttft=[1.0]), "keeps no per-request e2el_ms, output_tokens"),
        (requests(ttft=[1.0], e2el=[2.0], out=[1, 2]), "different lengths"),
        (requests(ttft=[], e2el=[], out=[]), "none at all"),
        (requests(ttft="1.0", e2el=[2.0], out=[1]), "not lists"),
    ],
)
def test_a_bench_without_usable_per_request_numbers_is_said_not_guessed(per_request, said):
    found = bench_goodput(per_request, SLO)
    assert isinstance(found, str) and said in found


def test_a_margin_turns_back_into_the_same_share():
    margins = share_margins([0.0, 0.5, 0.93, 1.0], 0.9)
    assert [margin_to_share(m, 0.9) for m in margins] == pytest.approx([0.0, 0.5, 0.93, 1.0])
    assert margins[2] > 0 > margins[1]
    assert margin_to_share(0.5, 0.9) == 1.0


def test_the_floor_is_the_binomial_sd_of_one_benchs_share_at_the_bar():
    assert binomial_sd_floor(0.9, [400]) == pytest.approx(0.015)
    draws = np.random.default_rng(3).binomial(400, 0.9, size=200_000) / 400
    assert float(share_margins(draws, 0.9).std()) == pytest.approx(0.015, rel=0.02)
    assert binomial_sd_floor(0.9, [100, 400]) == pytest.approx(
        np.sqrt(0.09 * (1 / 100 + 1 / 400) / 2)
    )


# --- the decision on simulated repetitions ---------------------------------------------------

PLAN = SequentialPlan(4, 8, confidence=0.90)  # one-sided level 5 % per side
GATES = 4000


def simulate(share: float, bar: float, n: int, *, seed: int, floor: bool = True, spread=0.0):
    """The floor cell's verdicts over GATES simulated attempts: each repetition's share a
    binomial draw over `n` requests around a true share that itself moves by `spread` (sd)
    between repetitions, decided the engine's way (margins, binomial floor, decide_cells)."""
    rng = np.random.default_rng(seed)
    truth = np.clip(share + spread * rng.standard_normal((GATES, PLAN.max_repetitions)), 0, 1)
    shares = rng.binomial(n, truth) / n
    margins = share_margins(shares, bar)[:, None, :]
    sd_floor = binomial_sd_floor(bar, [n] * PLAN.max_repetitions) if floor else 0.0
    return decide_cells(margins, PLAN, sd_floor=sd_floor).verdict[:, 0]


def rate_bound(level: float) -> float:
    """The declared level plus three Monte Carlo sds of a rate at it over GATES gates."""
    return level + 3 * np.sqrt(level * (1 - level) / GATES)


@pytest.mark.parametrize(
    ("bar", "n", "spread"),
    [(0.9, 200, 0.0), (0.9, 200, 0.02), (0.5, 64, 0.0), (0.99, 100, 0.0), (0.999, 1000, 0.0)],
)
def test_at_a_true_share_exactly_at_the_bar_it_passes_at_most_at_the_declared_level(bar, n, spread):
    verdicts = simulate(bar, bar, n, seed=11, spread=spread)
    assert (verdicts == PASS).mean() <= rate_bound((1 - PLAN.confidence) / 2)


def test_identical_shares_near_100_percent_would_pass_on_luck_without_the_binomial_floor():
    # 100 requests at a true 99 %: a third of benches see 100/100, and four such repetitions
    # make a zero-width t interval above a 99 % bar.
    naive = simulate(0.99, 0.99, 100, seed=5, floor=False)
    floored = simulate(0.99, 0.99, 100, seed=5)
    level = (1 - PLAN.confidence) / 2
    assert (naive == PASS).mean() > 1.5 * rate_bound(level)
    assert (floored == PASS).mean() <= rate_bound(level)


def test_a_share_well_above_the_bar_passes_with_high_power():
    assert (simulate(0.95, 0.9, 200, seed=7) == PASS).mean() >= 0.95


@pytest.mark.parametrize(("share", "n"), [(0.9, 200), (0.99, 100)])
def test_at_a_true_share_exactly_at_the_bar_it_fails_at_most_at_the_declared_level(share, n):
    verdicts = simulate(share, share, n, seed=12)
    assert (verdicts == FAIL).mean() <= rate_bound((1 - PLAN.confidence) / 2)


def test_a_share_well_below_the_bar_fails():
    assert (simulate(0.85, 0.9, 200, seed=8) == FAIL).mean() >= 0.95


# --- a goodput floor through decide_g3 -------------------------------------------------------

FLOOR = {
    "metric": "goodput",
    "slo": {"ttft_ms": 2000, "tpot_ms": 50},
    "arm": "offload",
    "at_least_pct": 90,
    "tiers": "all",
}


def bench(arm: str, repetition: int, within: int, of: int = 64, **extra) -> dict:
    """A bench whose first `within` requests meet FLOOR's SLO and the rest miss its TTFT."""
    ttft = [500.0] * within + [2500.0] * (of - within)
    per_request = {"ttft_ms": ttft, "e2el_ms": [t + 630 for t in ttft], "output_tokens": [64] * of}
    found = measurement(arm, repetition, 500.0, per_request=per_request, **extra)
    return found


def floor_result(within: list[int], clauses: list[dict] | None = None) -> dict:
    items = [
        bench(arm, rep, count)
        for rep, count in enumerate(within, 1)
        for arm in ("baseline", "offload")
    ]
    return decide_g3(g3_spec(clauses or [FLOOR]), items)


def test_a_goodput_floor_passes_and_shows_the_slo_in_words():
    result = floor_result([63, 64, 63, 64, 64, 63, 64, 64])
    cell = result["clauses"][0]
    assert (cell["verdict"], cell["change"], cell["compare"]) == ("pass", "floor", "offload")
    assert cell["shown"]["estimate"].startswith("offload: 9")
    assert "of requests within TTFT ≤ 2 s and TPOT ≤ 50 ms" in cell["shown"]["estimate"]
    assert "clears the bar 90 %" in cell["cause"]
    assert cell["goodput"]["shares"][0] == {
        "repetition": 1,
        "met": 63,
        "requests": 64,
        "share": 63 / 64,
    }
    assert cell["low"] >= 90 and cell["slo"]["text"] == "TTFT ≤ 2 s and TPOT ≤ 50 ms"
    json.dumps(result, allow_nan=False)


def test_a_goodput_floor_fails_when_the_share_is_well_below_the_bar():
    cell = floor_result([40, 42, 41, 40])["clauses"][0]
    assert cell["verdict"] == "fail" and cell["high"] < 90
    assert "lies wholly below the bar 90 %" in cell["cause"]


def test_a_bench_without_per_request_numbers_is_not_judged_on_goodput_and_said():
    items = [bench(arm, rep, 64) for rep in range(1, 5) for arm in ("baseline", "offload")]
    del items[1]["metrics"]["per_request"]
    result = decide_g3(g3_spec([FLOOR]), items)
    cell = result["clauses"][0]
    assert cell["verdict"] == "inconclusive" and len(cell["goodput"]["shares"]) == 3
    assert "repetition 1: the offload bench keeps no per-request numbers" in cell["dropped"][0]
    assert any("not judged on goodput" in note for note in result["notes"])
    assert result["plan"]["action"] == "run"


def test_goodput_compared_between_arms_is_a_ratio_of_shares():
    clause = {
        "metric": "goodput",
        "slo": {"ttft_ms": 2000},
        "compare": "offload/baseline",
        "change": "ratio",
        "at_least": 0.95,
        "tiers": "all",
    }
    items = [bench("baseline", rep, 60) for rep in range(1, 5)] + [
        bench("offload", rep, 63 + rep % 2) for rep in range(1, 5)
    ]
    cell = decide_g3(g3_spec([clause]), items)["clauses"][0]
    assert cell["pairs"][0]["a"] == pytest.approx(64 / 64) and cell["pairs"][0]["b"] == 60 / 64
    assert cell["verdict"] == "pass" and cell["slo"]["text"] == "TTFT ≤ 2 s"


def test_a_gate_with_a_floor_and_a_ratio_clause_splits_the_fail_side_over_both():
    ratio = {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "at_least_pct": 25,
        "tiers": "all",
    }
    result = floor_result([63, 64, 63, 64, 64, 63, 64, 64], [ratio, FLOOR])
    assert result["inputs"]["plan"]["cells"] == 2
    assert [cell["change"] for cell in result["clauses"]] == ["reduction", "floor"]
