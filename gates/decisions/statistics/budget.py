"""One error budget per G3 gate for the whole engagement, and what it gives under cancels and
resets. Rule: an attempt whose run reached its first planned look (its repetitions existed,
so an interim result could be seen) spends its whole share (1 - confidence) / attempts,
whatever happened to the run afterwards (pass, fail, inconclusive, canceled, invalid,
infra_error); an attempt stopped before its first look spends nothing (it decided nothing and
its data enter no later attempt). So at most `attempts` attempts can ever pass or fail, and the
engagement's false pass (and false fail) is at most the spec's one-sided budget, under any
cancel policy; each signed stop-loss reset opens `attempts` more and adds one budget.
Pure: plain numbers in, typed documents out; imports no Django.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from documents.characteristic import ErrorBudget, LifetimeRow, ResetCost
from gates.decisions.clauses import G3Terms
from gates.decisions.statistics.inference import SequentialPlan
from gates.decisions.statistics.simulation import (
    GateOutcome,
    draw_gate,
    gate_outcome,
    wilson_half_width,
)

POLICIES = {
    "honest": "re-run every inconclusive attempt while attempts are left",
    "cancel_after_first_look": "cancel every attempt still open after its first look, re-run",
    "cancel_when_weak": "cancel an attempt whose interim estimate at the first look is on the "
    "failing side for any cell, re-run",
    "one_reset": "re-run every inconclusive attempt, and sign one stop-loss reset",
}


def attempt_spent(looks_reached: int) -> bool:
    """Whether an attempt whose run reached `looks_reached` planned looks spent its share."""
    return looks_reached >= 1


def looks_reached(min_repetitions: int, max_repetitions: int, complete_repetitions: int) -> int:
    """How many of the attempt's planned looks its complete repetitions (every cell measured)
    reached: what `attempt_spent` judges a run by, whatever ended it."""
    plan = SequentialPlan(min_repetitions, max_repetitions, confidence=0.95)  # looks only
    return sum(look <= complete_repetitions for look in plan.looks)


def error_budget(parsed: G3Terms, looks_reached: Sequence[int], resets: int = 0) -> ErrorBudget:
    """Where the gate's budget stands: `looks_reached` holds one entry per past attempt of the
    gate (every run, canceled ones too), `resets` the signed stop-loss resets. `next_attempt`
    is what the engine's `context.attempt` must say for the next run (None: none left)."""
    per_side = (1 - parsed.confidence) / 2
    attempts = parsed.statistics.attempts
    spent = sum(attempt_spent(count) for count in looks_reached)
    allowed = attempts * (1 + resets)
    left = max(0, allowed - spent)
    in_window = spent - attempts * resets
    return {
        "per_side": per_side,
        "share_per_attempt": per_side / attempts,
        "attempts_allowed": allowed,
        "attempts_spent": spent,
        "attempts_left": left,
        "error_spent": per_side / attempts * min(spent, allowed),
        "lifetime_error": per_side * (1 + resets),
        "next_attempt": max(1, in_window + 1) if left else None,
    }


def reset_cost(parsed: G3Terms, resets_so_far: int) -> ResetCost:
    """What one more stop-loss reset adds, to be shown before both parties sign it."""
    per_side = (1 - parsed.confidence) / 2
    return {
        "adds_per_side": per_side,
        "lifetime_before": per_side * (1 + resets_so_far),
        "lifetime_after": per_side * (2 + resets_so_far),
        "attempts_added": parsed.statistics.attempts,
    }


def lifetime_rows(
    parsed: G3Terms,
    plan: SequentialPlan,
    sd: float,
    scenarios: dict[str, np.ndarray],
    *,
    gates: int,
    rng: np.random.Generator,
    floors: np.ndarray,
) -> list[LifetimeRow]:
    """Each scenario's true margins under each policy, over the whole engagement."""
    rows: list[LifetimeRow] = []
    attempts = parsed.statistics.attempts
    for name, margins in scenarios.items():
        tries = []
        for _ in range(2 * attempts):
            draw = draw_gate(parsed, plan, sd, gates, rng)
            found = gate_outcome(draw.walk(margins, plan, floors), plan)
            weak = (draw.summaries[0].mean + margins[None, :] < 0).any(axis=1)
            tries.append((found, weak))
        for policy, text in POLICIES.items():
            limit = 2 * attempts if policy == "one_reset" else attempts
            passed, failed, used = _engagement(tries[:limit], policy)
            rows.append(
                {
                    "scenario": name,
                    "policy": policy,
                    "policy_text": text,
                    "pass": passed,
                    "fail": failed,
                    "attempts": used,
                    "half_width_95": {
                        "pass": wilson_half_width(passed, gates),
                        "fail": wilson_half_width(failed, gates),
                    },
                    "declared": (1 - parsed.confidence) / 2 * (2 if policy == "one_reset" else 1),
                }
            )
    return rows


def _engagement(
    tries: list[tuple[GateOutcome, np.ndarray]], policy: str
) -> tuple[float, float, float]:
    """Ever passed, ever failed and attempts spent when a team follows `policy`."""
    first = tries[0][0]
    ever_pass = np.zeros(first.passed.size, dtype=bool)
    ever_fail = np.zeros_like(ever_pass)
    trying = np.ones_like(ever_pass)
    used = np.zeros(first.passed.size)
    for found, weak in tries:
        passed, failed = found.passed.copy(), found.failed.copy()
        if policy == "cancel_after_first_look":
            passed, failed = found.pass_look == 0, found.fail_look == 0
        elif policy == "cancel_when_weak":
            canceled = weak & (found.pass_look > 0) & (found.fail_look > 0)
            passed, failed = passed & ~canceled, failed & ~canceled
        used += trying
        ever_pass |= trying & passed
        ever_fail |= trying & failed
        trying &= ~passed & ~failed
    return float(ever_pass.mean()), float(ever_fail.mean()), float(used.mean())
