"""Error rates of the G3 decision engine against the single-run fixed-percentage rule, side by side.

Both rules see the same synthetic repetitions: per arm and repetition a lognormal value with the
given coefficient of variation, and a known true offload/baseline TTFT reduction. The clause is
"ttft_p50 offload/baseline reduction >= 25 %" with the G3 template's plan (min 3, max 8
repetitions, confidence 0.90). The single-run rule looks at repetition 1 only and passes when the
observed reduction is >= 25 %, fails otherwise (how common benchmark gates decide).

    .venv/bin/python bench/decision_error_rates.py [--gates 20000] [--seed 2026]

prints the markdown table used in docs/decisions.md.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from gates.decisions.inference import (
    FAIL,
    PASS,
    SequentialPlan,
    clause_margins,
    decide_sequentially,
)

THRESHOLD_PCT = 25.0
PLAN = SequentialPlan(min_repetitions=3, max_repetitions=8, confidence=0.90)
TRUE_REDUCTIONS_PCT = (0.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0)
NOISE_CVS = (0.05, 0.10, 0.15)


def simulate(rng: np.random.Generator, reduction_pct: float, cv: float, gates: int) -> np.ndarray:
    """Per-repetition log(offload / baseline), shape (gates, max repetitions)."""
    sigma = math.sqrt(math.log1p(cv**2))
    shape = (gates, PLAN.max_repetitions)
    offload = rng.normal(-(sigma**2) / 2, sigma, shape)
    baseline = rng.normal(-(sigma**2) / 2, sigma, shape)
    return math.log(1 - reduction_pct / 100) + offload - baseline


def engine_rates(log_ratios: np.ndarray) -> dict:
    bound = 1 - THRESHOLD_PCT / 100
    outcome = decide_sequentially(clause_margins(log_ratios, "reduction", bound), PLAN)
    used = np.where(outcome.verdict == 0, PLAN.max_repetitions, np.array(PLAN.looks)[outcome.look])
    return {
        "pass": float(np.mean(outcome.verdict == PASS)),
        "fail": float(np.mean(outcome.verdict == FAIL)),
        "inconclusive": float(np.mean(outcome.verdict == 0)),
        "repetitions": float(np.mean(used)),
    }


def single_run_rates(log_ratios: np.ndarray) -> dict:
    observed_reduction = 100 * (1 - np.exp(log_ratios[:, 0]))
    passed = float(np.mean(observed_reduction >= THRESHOLD_PCT))
    return {"pass": passed, "fail": 1 - passed}


def truth_label(reduction_pct: float) -> str:
    if reduction_pct < THRESHOLD_PCT:
        return "below (pass is wrong)"
    if reduction_pct > THRESHOLD_PCT:
        return "above (fail is wrong)"
    return "at threshold"


def table(gates: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = [
        "| true reduction | truth vs 25 % | noise CV | engine pass | engine fail | "
        "engine inconclusive | engine mean reps | single-run pass | single-run fail |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for reduction in TRUE_REDUCTIONS_PCT:
        for cv in NOISE_CVS:
            log_ratios = simulate(rng, reduction, cv, gates)
            engine, single = engine_rates(log_ratios), single_run_rates(log_ratios)
            lines.append(
                f"| {reduction:g} % | {truth_label(reduction)} | {cv:.0%} | {engine['pass']:.1%} | "
                f"{engine['fail']:.1%} | {engine['inconclusive']:.1%} | "
                f"{engine['repetitions']:.1f} | {single['pass']:.1%} | {single['fail']:.1%} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gates", type=int, default=20_000, help="simulated gates per row")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    started = time.perf_counter()
    lines = table(args.gates, args.seed)
    print("\n".join(lines))
    looks = ", ".join(
        f"{n} (alpha {a:.4f})" for n, a in zip(PLAN.looks, PLAN.look_alphas, strict=True)
    )
    print(
        f"\nplan looks: {looks}; {args.gates} gates per row, seed {args.seed}, "
        f"{time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
