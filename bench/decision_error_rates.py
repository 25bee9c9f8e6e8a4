"""Error rates of the G3 decision engine beside three common rules, on the same simulated data.

Per arm and repetition a lognormal value with the given coefficient of variation, and known
true effects. Three tables:

1. one clause ("ttft_p50 offload/baseline reduction >= 25 %", one tier) against the true
   reduction: the engine with the template plan (looks 4, 6, 8; one attempt's share of the
   budget) beside the fixed-percentage, Perfherder-style and Bencher-style rules
   (bench/decision_rules.py);
2. the whole default spec (8 cells, arm-level noise so cells sharing an arm are correlated):
   every cell at its bar, one at its bar with the rest clear, every cell clear (as far above its
   bar as 40 % is above 25 %): the engine, the same engine with no family-wise control (each
   cell decided alone), and the three rules cell by cell (the gate passes when every cell does);
3. across attempts: a team re-runs every attempt that is not a pass, up to the cap (the
   engine's 2, with the budget split) or 10 times for the rules that have no cap;
4. pooling one clause's sd across its 3 tiers (`statistics.pool_tiers`) beside each tier on its
   own sd: tiers at the bar with alike, unequal or shared noise, and tiers clear of it;
5. the shipped template at its stated noise (issue 26): power at the claims, the at-bar rates per
   attempt and over the engagement under cancel and reset policies (its OC, with Wilson 95 %
   half-widths), a copied repetition, and the boundaries' realised level on fresh null paths;
6. a step inside one repetition: the template's plan and noise, the cell "ttft_p50 reduction
   >= 25 %" at its bar at tiers 4, 8 and 16, one first-look repetition with its baseline bench a
   fifth slower from mid-bench: false pass without and with the step check
   (`statistics.outliers.step_level`, the bench scaled by the median of the first look's 8
   baseline benches at that tier), and the check's flags on the same benches undisturbed;
7. a goodput floor ("offload keeps at least X % of its requests within the SLO", one tier): each
   repetition's share a binomial draw over the bench's requests around a true share that moves
   between repetitions by the given sd, true share at, above and below the bar: the engine (the
   sd floored at the binomial sd at the bar) beside the same walk without that floor.

Tables 1-4 use the short plan (looks 4, 6, 8) so they compare with the field's rules as before;
tables 5 and 6 use the template as shipped.

    .venv/bin/python bench/decision_error_rates.py [--gates 20000] [--seed 2026] [--steps-only]

prints the markdown tables used in docs/decisions.md (`--steps-only`: table 6 alone).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

# Run as a script: the repository root, for `bench.` and the apps.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.decision_rules import bencher_pass, fixed_percentage_pass, perfherder_pass
from gates.decisions import decide_g3
from gates.decisions.clauses import parse_g3_spec
from gates.decisions.statistics.boundaries import critical_values, null_t_statistics
from gates.decisions.statistics.inference import (
    FAIL,
    PASS,
    SequentialPlan,
    clause_margins,
    decide_cells,
)
from gates.decisions.statistics.operating import gate_plan, operating_characteristic
from gates.decisions.statistics.shares import binomial_sd_floor, share_margins
from gates.decisions.statistics.spread import sd_from_cv
from gates.decisions.statistics.steps import stepped_gates
from gates.specs.validation import default_spec

TEMPLATE = default_spec("G3")
SHORT = {**TEMPLATE, "repetitions": {"min": 4, "max": 8}}
SPEC = parse_g3_spec(SHORT)
CELLS = [(clause, tier) for clause in SPEC.clauses for tier in clause.tiers]
REPS = SPEC.max_repetitions
RULES = {"fixed %": fixed_percentage_pass, "Perfherder": perfherder_pass, "Bencher": bencher_pass}
TRUE_REDUCTIONS_PCT = (0.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0)
NOISE_CVS = (0.05, 0.10, 0.15)


def plan(cells: int) -> SequentialPlan:
    return SequentialPlan(
        SPEC.min_repetitions,
        SPEC.max_repetitions,
        SPEC.confidence,
        attempts=SPEC.statistics.attempts,
        cells=cells,
    )


def arm_noise(rng, cv: float, gates: int) -> np.ndarray:
    sigma = math.sqrt(math.log1p(cv**2))
    return rng.normal(-(sigma**2) / 2, sigma, (gates, REPS))


def engine_outcome(logs: np.ndarray, bounds: list[float], changes: list[str], cells: int):
    """logs (gates, cells, reps) of log(A/B) -> the engine's per-cell outcome."""
    margins = np.stack(
        [clause_margins(logs[:, i], changes[i], bounds[i]) for i in range(logs.shape[1])], axis=1
    )
    return decide_cells(margins, plan(cells), sd_floor=SPEC.statistics.sd_floor)


def used_repetitions(outcome, the_plan: SequentialPlan) -> np.ndarray:
    looks = np.array(the_plan.looks)[outcome.look]
    return np.where(outcome.verdict == 0, the_plan.max_repetitions, looks)


def clause_table(rng, gates: int) -> list[str]:
    lines = [
        "| true reduction | noise CV | engine pass | engine fail | engine inconclusive | "
        "engine mean reps | fixed % pass | Perfherder pass | Bencher pass |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for reduction in TRUE_REDUCTIONS_PCT:
        for cv in NOISE_CVS:
            offload = math.log(1 - reduction / 100) + arm_noise(rng, cv, gates)
            baseline = arm_noise(rng, cv, gates)
            outcome = engine_outcome((offload - baseline)[:, None], [0.75], ["reduction"], 1)
            verdict = outcome.verdict[:, 0]
            reps = used_repetitions(outcome, plan(1))[:, 0].mean()
            rules = [f"{rule(offload, baseline, 0.75).mean():.1%}" for rule in RULES.values()]
            lines.append(
                f"| {reduction:g} % | {cv:.0%} | {(verdict == PASS).mean():.1%} | "
                f"{(verdict == FAIL).mean():.1%} | {(verdict == 0).mean():.1%} | {reps:.1f} | "
                + " | ".join(rules)
                + " |"
            )
    return lines


def gate_data(rng, truths: list[float], cv: float, gates: int) -> dict:
    """Per cell the two arms' log values: {(cell): (a, b)} with shared arm noise."""
    noise = {
        (metric, arm, tier): arm_noise(rng, cv, gates)
        for metric in ("ttft_p50", "output_throughput")
        for arm in SPEC.arms
        for tier in SPEC.tiers
    }
    return [
        (math.log(truth) + noise[(c.metric, c.a, tier)], noise[(c.metric, c.b, tier)])
        for (c, tier), truth in zip(CELLS, truths, strict=True)
    ]


def scenario(name: str) -> list[float]:
    clear = math.log(0.75 / 0.60)
    bars = [c.bound_ratio for c, _ in CELLS]
    if name == "every cell at its bar":
        return bars
    moved = [
        b * math.exp(-clear if c.change == "reduction" else clear)
        for (c, _), b in zip(CELLS, bars, strict=True)
    ]
    if name == "one cell at its bar, the rest clear":
        return [bars[0], *moved[1:]]
    return moved


def rule_gate_pass(rule, data, cells) -> np.ndarray:
    """A cell-by-cell rule as a gate: every cell must pass (a lower-is-better cell is A/B)."""
    passed = np.ones(data[0][0].shape[0], dtype=bool)
    for (clause, _), (a, b) in zip(cells, data, strict=True):
        if clause.change == "reduction":
            passed &= rule(a, b, clause.bound_ratio)
        else:  # higher passes: compare b/a against 1/bound
            passed &= rule(b, a, 1 / clause.bound_ratio)
    return passed


def gate_table(rng, gates: int) -> list[str]:
    lines = [
        "| default spec (8 cells) | noise CV | engine pass | engine fail | engine inconclusive | "
        "engine mean reps | no family control: fail | fixed % pass | Perfherder pass | "
        "Bencher pass |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    bounds = [c.bound_ratio for c, _ in CELLS]
    changes = [c.change for c, _ in CELLS]
    for name in (
        "every cell at its bar",
        "one cell at its bar, the rest clear",
        "every cell clear",
    ):
        for cv in (0.10, 0.20):
            data = gate_data(rng, scenario(name), cv, gates)
            logs = np.stack([a - b for a, b in data], axis=1)
            outcome = engine_outcome(logs, bounds, changes, len(CELLS))
            passed = (outcome.verdict == PASS).all(axis=1)
            failed = (outcome.verdict == FAIL).any(axis=1)
            reps = _gate_reps(outcome, passed, failed).mean()
            alone = np.zeros(gates, dtype=bool)
            for i in range(len(CELLS)):
                single = engine_outcome(
                    logs[:, i : i + 1], bounds[i : i + 1], changes[i : i + 1], 1
                )
                alone |= single.verdict[:, 0] == FAIL
            rules = [f"{rule_gate_pass(rule, data, CELLS).mean():.1%}" for rule in RULES.values()]
            lines.append(
                f"| {name} | {cv:.0%} | {passed.mean():.1%} | {failed.mean():.1%} | "
                f"{(~passed & ~failed).mean():.1%} | {reps:.1f} | {alone.mean():.1%} | "
                + " | ".join(rules)
                + " |"
            )
    return lines


def _gate_reps(outcome, passed, failed) -> np.ndarray:
    looks = np.array(plan(len(CELLS)).looks)[outcome.look]
    fail_at = np.where(outcome.verdict == FAIL, looks, REPS).min(axis=1)
    return np.where(failed, fail_at, np.where(passed, looks.max(axis=1), REPS))


def attempts_table(rng, gates: int) -> list[str]:
    lines = [
        "| one clause, true effect | noise CV | engine: ever passes within its 2 attempts | "
        "engine at the full budget, re-run 10 times | fixed % re-run 10 times | "
        "Perfherder re-run 10 times | Bencher re-run 10 times |",
        "|---|---|---|---|---|---|---|",
    ]
    for reduction, cv in ((25.0, 0.10), (20.0, 0.20), (20.0, 0.10)):
        capped = _ever_passed(rng, reduction, cv, gates, SPEC.statistics.attempts, split=True)
        unlimited = _ever_passed(rng, reduction, cv, gates, 10, split=False)
        rules = []
        for rule in RULES.values():
            ever = np.zeros(gates, dtype=bool)
            for _ in range(10):
                offload = math.log(1 - reduction / 100) + arm_noise(rng, cv, gates)
                ever |= rule(offload, arm_noise(rng, cv, gates), 0.75)
            rules.append(f"{ever.mean():.1%}")
        lines.append(
            f"| {reduction:g} % (bar 25 %) | {cv:.0%} | {capped:.1%} | {unlimited:.1%} | "
            + " | ".join(rules)
            + " |"
        )
    return lines


def _ever_passed(rng, reduction, cv, gates, attempts, *, split: bool) -> float:
    the_plan = SequentialPlan(
        SPEC.min_repetitions, REPS, SPEC.confidence, attempts=attempts if split else 1, cells=1
    )
    ever = np.zeros(gates, dtype=bool)
    trying = np.ones(gates, dtype=bool)
    for _ in range(attempts):
        logs = math.log(1 - reduction / 100) + arm_noise(rng, cv, gates) - arm_noise(rng, cv, gates)
        margins = clause_margins(logs, "reduction", 0.75)[:, None, :]
        verdict = decide_cells(margins, the_plan, sd_floor=SPEC.statistics.sd_floor).verdict[:, 0]
        ever |= trying & (verdict == PASS)
        trying &= verdict == 0  # a fail ends the engagement's tries at this gate
    return float(ever.mean())


POOLING_ROWS = (
    # (label, true reduction % per tier, CV per tier, share of the noise the tiers share)
    ("every tier at its bar, alike noise", (25.0,) * 3, (0.10,) * 3, 0.0),
    ("every tier at its bar, tier 1 noisier (1.5x)", (25.0,) * 3, (0.15, 0.10, 0.10), 0.0),
    (
        "every tier at its bar, tiers move together (half the noise shared)",
        (25.0,) * 3,
        (0.10,) * 3,
        0.5,
    ),
    ("every tier at 35 %", (35.0,) * 3, (0.10,) * 3, 0.0),
    ("every tier at 40 %", (40.0,) * 3, (0.20,) * 3, 0.0),
)


def pooling_table(rng, gates: int) -> list[str]:
    lines = [
        "| one clause at 3 tiers | per-tier sd: tier 1 pass | tier 1 fail | clause pass | "
        "mean reps | pooled: tier 1 pass | tier 1 fail | clause pass | mean reps | looks pooled |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    the_plan = plan(3)
    for label, reductions, cvs, shared in POOLING_ROWS:
        margins = _tier_margins(rng, reductions, cvs, shared, gates)
        cells = []
        for groups in (None, np.zeros(3, dtype=int)):
            outcome = decide_cells(
                margins, the_plan, sd_floor=SPEC.statistics.sd_floor, groups=groups
            )
            first = outcome.verdict[:, 0]
            cells += [
                f"{(first == PASS).mean():.1%}",
                f"{(first == FAIL).mean():.1%}",
                f"{(outcome.verdict == PASS).all(axis=1).mean():.1%}",
                f"{used_repetitions(outcome, the_plan).max(axis=1).mean():.1f}",
            ]
        cells.append(f"{(outcome.pooled > 1).mean():.0%}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def _tier_margins(rng, reductions, cvs, shared: float, gates: int) -> np.ndarray:
    """(gates, 3, reps) margins of "ttft_p50 reduction >= 25 %": per tier, each arm's lognormal
    noise of that CV, `shared` of its variance common to the tiers (one server session)."""
    common = [arm_noise(rng, 0.10, gates) for _ in range(2)]
    tiers = []
    for reduction, cv in zip(reductions, cvs, strict=True):
        scale = cv / 0.10
        arms = [
            scale * (math.sqrt(shared) * c + math.sqrt(1 - shared) * arm_noise(rng, 0.10, gates))
            for c in common
        ]
        logs = math.log(1 - reduction / 100) + arms[0] - arms[1]
        tiers.append(clause_margins(logs, "reduction", 0.75))
    return np.stack(tiers, axis=1)


def template_table(gates: int, seed: int) -> list[str]:
    """The shipped template at its stated noise, through its own operating characteristic."""
    oc = operating_characteristic(TEMPLATE, gates=gates, seed=seed)
    assert oc["available"]
    gate = oc["gate"]
    lines = [
        "| shipped template, stated noise | pass | fail | mean reps | declared |",
        "|---|---|---|---|---|",
        _row("every clause at its claim, one attempt", gate["at_claims"], None),
        _row("every cell at its bar, one attempt", gate["at_bars"], PER_SIDE / 2),
    ]
    for row in gate.get("lifetime", []):
        label = f"{row['scenario']}, engagement: {row['policy_text']}"
        widths = row["half_width_95"]
        lines.append(
            f"| {label} | {row['pass']:.2%} +- {widths['pass']:.2%} | "
            f"{row['fail']:.2%} +- {widths['fail']:.2%} | {row['attempts']:.2f} attempts | "
            f"{row['declared']:.1%} |"
        )
    lines.append(_copied_row())
    lines += _level_rows()
    return lines


PER_SIDE = (1 - TEMPLATE["confidence"]) / 2


def _row(label: str, found, declared: float | None) -> str:
    widths = found["half_width_95"]
    return (
        f"| {label} | {found['pass']:.2%} +- {widths['pass']:.2%} | "
        f"{found['fail']:.2%} +- {widths['fail']:.2%} | {found['repetitions']:.1f} | "
        + ("-" if declared is None else f"{declared:.2%}")
        + " |"
    )


def _copied_row() -> str:
    """One repetition's measurements copied into another (distinct files): always invalid."""
    rows = []
    for rep in range(1, 5):
        source = 1 if rep == 4 else rep
        for arm, ratio in (("baseline", 1.0), ("offload", 0.75)):
            ttft = 1000.0 * (1 + source / 50) * ratio
            rows.append(
                {
                    "arm": arm,
                    "tier": 8,
                    "repetition": rep,
                    "metrics": {"ttft_ms": {"median": ttft}, "output_throughput": 1e6 / ttft},
                    "server": {},
                }
            )
    verdict = decide_g3(TEMPLATE, rows, {"kv_exceeds_vram": True})["verdict"]
    return f"| one repetition copied into another (distinct files) | verdict: {verdict} | | | |"


def _level_rows() -> list[str]:
    lines = []
    draws = 2**22
    for level in (0.025, 0.003125):
        values = np.array(critical_values((4, 6, 8), 8, level), dtype=np.float32)
        found = null_t_statistics((4, 6, 8), 1, draws, np.random.default_rng(7))
        realised = float((found >= values).any(axis=1).mean())
        sd = math.sqrt(level * (1 - level) / draws)
        lines.append(
            f"| realised one-sided level of the 4-6-8 boundaries at {level:.4%} "
            f"({draws} fresh null paths) | {realised:.4%} +- {1.96 * sd:.4%} | | | {level:.4%} |"
        )
    return lines


# (label, load on the prefill server, prefill log sd): where the check finds a fifth, and where
# the queue's own noise hides it (docs/decisions.md "The step check").
STEP_REGIMES = (
    ("saturated queue, prefill CV 5 %", 4.0, 0.05),
    ("load 3, prefill CV 15 %", 3.0, 0.15),
)


def step_table(rng, gates: int) -> list[str]:
    parsed = parse_g3_spec(TEMPLATE)
    rules = TEMPLATE["statistics"]
    level = rules["outliers"]["step_level"]
    benches = len(parsed.arms) * len(parsed.tiers)
    requests = TEMPLATE["workload"]["num_prompts"]
    lines = [
        f"| +20 % baseline step from mid-bench, {requests} requests, template plan | tier | "
        "false pass, no step check | false pass, step check | stepped benches flagged | "
        "undisturbed benches flagged | limit on R | declared |",
        "|---|---|---|---|---|---|---|---|",
    ]
    the_plan = gate_plan(parsed)
    for label, load, prefill_sd in STEP_REGIMES:
        for tier in parsed.tiers:
            found = stepped_gates(
                rng,
                gates,
                the_plan,
                sd_from_cv(rules["noise_cv_pct"]),
                sd_floor=parsed.statistics.sd_floor,
                level=level,
                benches_per_repetition=benches,
                requests=requests,
                tier=tier,
                load=load,
                prefill_sd=prefill_sd,
                slower_by=0.2,
            )
            lines.append(
                f"| {label} | {tier} | {_share(found.false_pass_unchecked, gates)} | "
                f"{_share(found.false_pass_checked, gates)} | {found.stepped_flagged:.1%} | "
                f"{_share(found.undisturbed_flagged, gates)} (at most {found.tail:.2%}) | "
                f"{found.limit:.2f} | {the_plan.alpha / 2:.2%} pass |"
            )
    return lines


# (bar, requests per bench, sd of the true share between repetitions)
GOODPUT_REGIMES = ((0.90, 200, 0.0), (0.90, 200, 0.02), (0.99, 100, 0.0), (0.999, 1000, 0.0))
GOODPUT_SHIFTS = (("at the bar", 0.0), ("half-way to 100 %", 0.5), ("below the bar", -0.5))


def goodput_table(rng, gates: int) -> list[str]:
    """A goodput floor cell decided by the engine's walk (g3's floor cells), with and without
    the binomial sd floor, at a true share at, above and below the bar."""
    lines = [
        "| bar, requests per bench, sd of the true share | true share | pass | fail | "
        "pass without the binomial floor | declared |",
        "|---|---|---|---|---|---|",
    ]
    the_plan = plan(1)
    for bar, requests, spread in GOODPUT_REGIMES:
        for label, towards in GOODPUT_SHIFTS:
            # Half-way to 100 % above the bar; below it by as much as the bar is from 100 %.
            true = min(bar + towards * (1 - bar), 1.0) if towards >= 0 else bar - (1 - bar)
            truth = np.clip(true + spread * rng.standard_normal((gates, REPS)), 0, 1)
            margins = share_margins(rng.binomial(requests, truth) / requests, bar)[:, None, :]
            floor = binomial_sd_floor(bar, [requests])
            floored = decide_cells(margins, the_plan, sd_floor=floor).verdict[:, 0]
            bare = decide_cells(margins, the_plan).verdict[:, 0]
            lines.append(
                f"| {bar:.1%}, {requests}, {spread:g} | {label} ({true:.2%}) | "
                f"{_share(float((floored == PASS).mean()), gates)} | "
                f"{_share(float((floored == FAIL).mean()), gates)} | "
                f"{_share(float((bare == PASS).mean()), gates)} | "
                f"{the_plan.alpha / 2:.2%} a side |"
            )
    return lines


def _share(value: float, draws: int) -> str:
    return f"{value:.2%} +- {1.96 * math.sqrt(max(value * (1 - value), 1e-12) / draws):.2%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gates", type=int, default=20_000, help="simulated gates per row")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--steps-only", action="store_true", help="only table 6, the step inside a repetition"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    # The step table draws from its own generator, so --steps-only prints the same rows.
    steps = step_table(np.random.default_rng(args.seed), args.gates)
    if args.steps_only:
        print("\n".join(steps), end="\n\n")
        print(
            f"{args.gates} gates per row, seed {args.seed}, {time.perf_counter() - started:.1f} s"
        )
        return
    for lines in (
        clause_table(rng, args.gates),
        gate_table(rng, args.gates),
        attempts_table(rng, args.gates),
        pooling_table(rng, args.gates),
        template_table(args.gates, args.seed),
        steps,
        goodput_table(rng, args.gates),
    ):
        print("\n".join(lines), end="\n\n")
    one = plan(1)
    looks = ", ".join(f"{n} (t {c:.2f})" for n, c in zip(one.looks, one.pass_critical, strict=True))
    print(
        f"plan looks: {looks}; attempts {one.attempts}; {args.gates} gates per row, "
        f"seed {args.seed}, {time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
