"""One error budget per G3 gate for the whole engagement, and what it gives under cancels and
resets. Rule: an attempt whose run has one complete repetition (every cell measured, so its
interim numbers could be seen) spends its whole share (1 - confidence) / attempts, whatever
happened to the run afterwards (pass, fail, inconclusive, canceled, invalid, infra_error); an
attempt stopped before any complete repetition spends nothing (no data was seen, and none
enters a later attempt). Charging only from the first look would let a team watch repetitions
1..min-1, cancel when they look weak and restart for free. So at most `attempts` attempts can
ever pass or fail, and the engagement's false pass (and false fail) is at most the spec's
one-sided budget, under any cancel policy; each signed stop-loss reset opens `attempts` more
and adds one budget.
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
    draw_margins,
    gate_outcome,
    summarize_draw,
    wilson_half_width,
)

POLICIES = {
    "honest": "re-run every inconclusive attempt while attempts are left",
    "cancel_after_first_look": "cancel every attempt still open after its first look, re-run",
    "cancel_when_weak": "cancel an attempt whose interim estimate at the first look is on the "
    "failing side for any cell, re-run",
    "cancel_before_first_look": "cancel an attempt whose first complete repetition is on the "
    "failing side for any cell (before the first look: it spends the attempt), re-run",
    "one_reset": "re-run every inconclusive attempt, and sign one stop-loss reset",
}


def attempt_spent(complete_repetitions: int) -> bool:
    """Whether an attempt whose run has `complete_repetitions` (every cell measured) spent its
    share: from its first one, before the first look too, since interim numbers are visible."""
    return complete_repetitions >= 1


def error_budget(
    parsed: G3Terms, complete_repetitions: Sequence[int], resets: int = 0
) -> ErrorBudget:
    """Where the gate's budget stands: `complete_repetitions` holds one entry per past attempt
    of the gate (every run, canceled ones too), `resets` the signed stop-loss resets.
    `next_attempt` is what the engine's `context.attempt` must say for the next run (None:
    none left)."""
    per_side = (1 - parsed.confidence) / 2
    attempts = parsed.statistics.attempts
    spent = sum(attempt_spent(count) for count in complete_repetitions)
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


def attempt_plan(parsed: G3Terms, cells: int, carried: int = 0) -> SequentialPlan:
    """The looks of one attempt. With `carried` repetitions from an inconclusive attempt
    (statistics.carry_repetitions), the looks continue on the union at carried + each planned
    look, so the carried looks are not looked at again; the boundaries are those of a
    group-sequential test on the union at this attempt's own share of the budget. Its false
    pass is at most that share whatever the carried data did (its own test holds marginally),
    so the engagement's is at most the sum of the attempts' shares, as without carrying."""
    return SequentialPlan(
        carried + parsed.min_repetitions,
        carried + parsed.max_repetitions,
        parsed.confidence,
        attempts=parsed.statistics.attempts,
        cells=cells,
    )


def reset_cost(parsed: G3Terms, resets_so_far: int) -> ResetCost:
    """What one more stop-loss reset adds, to be shown before both parties sign it."""
    per_side = (1 - parsed.confidence) / 2
    return {
        "adds_per_side": per_side,
        "lifetime_before": per_side * (1 + resets_so_far),
        "lifetime_after": per_side * (2 + resets_so_far),
        "attempts_added": parsed.statistics.attempts,
    }


# With statistics.carry_repetitions, what the policy text adds: an attempt left inconclusive
# hands its repetitions to the next one (a canceled one hands none).
CARRYING_TEXT = "; an inconclusive attempt carries its repetitions into the next"


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
    """Each scenario's true margins under each policy, over the whole engagement; attempts
    re-run afresh, or carry their repetitions when the spec says so."""
    rows: list[LifetimeRow] = []
    attempts = parsed.statistics.attempts
    carrying = parsed.statistics.carry_repetitions
    for name, margins in scenarios.items():
        if carrying:
            # One stream of repetitions per gate: attempt k's own are block k, and a carrying
            # attempt also reads the blocks of the inconclusive chain before it.
            stream = draw_margins(parsed, 2 * attempts * plan.max_repetitions, sd, gates, rng)
            judged: dict[tuple[int, int], tuple[GateOutcome, np.ndarray, np.ndarray]] = {}
        else:
            tries = [
                _fresh_try(parsed, plan, sd, gates, rng, margins, floors)
                for _ in range(2 * attempts)
            ]
        for policy, text in POLICIES.items():
            limit = 2 * attempts if policy == "one_reset" else attempts
            if carrying:
                passed, failed, used = _carrying_engagement(
                    parsed, stream, margins, floors, limit, policy, judged
                )
            else:
                passed, failed, used = _engagement(tries[:limit], policy)
            rows.append(
                {
                    "scenario": name,
                    "policy": policy,
                    "policy_text": text + (CARRYING_TEXT if carrying else ""),
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


def _fresh_try(
    parsed: G3Terms,
    plan: SequentialPlan,
    sd: float,
    gates: int,
    rng: np.random.Generator,
    margins: np.ndarray,
    floors: np.ndarray,
) -> tuple[GateOutcome, np.ndarray, np.ndarray]:
    """One attempt on new repetitions: its outcome, which gates look weak at the first look
    (some cell's interim estimate on the failing side), and which after its first repetition."""
    noise = draw_margins(parsed, plan.max_repetitions, sd, gates, rng)  # as draw_gate draws them
    draw = summarize_draw(parsed, noise, plan)
    found = gate_outcome(draw.walk(margins, plan, floors), plan)
    weak = (draw.summaries[0].mean + margins[None, :] < 0).any(axis=1)
    return found, weak, _looks_weak(noise[:, :, :1], margins)


def _looks_weak(noise: np.ndarray, margins: np.ndarray) -> np.ndarray:
    """Per gate: some cell's mean over these repetitions (gates, cells, repetitions) is on the
    failing side of its bar."""
    weak: np.ndarray = (noise.mean(axis=2) + margins[None, :] < 0).any(axis=1)
    return weak


def _acted(
    found: GateOutcome, weak: np.ndarray, peeked: np.ndarray, policy: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What an attempt ends as when a team follows `policy`: passed, failed, canceled."""
    passed, failed = found.passed.copy(), found.failed.copy()
    canceled = np.zeros_like(passed)
    if policy == "cancel_before_first_look":
        # Nothing is decided before the first look: whatever looked weak then ends canceled.
        canceled = peeked.copy()
        passed, failed = passed & ~canceled, failed & ~canceled
    elif policy == "cancel_after_first_look":
        passed, failed = found.pass_look == 0, found.fail_look == 0
        canceled = ~passed & ~failed
    elif policy == "cancel_when_weak":
        canceled = weak & (found.pass_look > 0) & (found.fail_look > 0)
        passed, failed = passed & ~canceled, failed & ~canceled
    return passed, failed, canceled


def _engagement(
    tries: list[tuple[GateOutcome, np.ndarray, np.ndarray]], policy: str
) -> tuple[float, float, float]:
    """Ever passed, ever failed and attempts spent when a team follows `policy`."""
    first = tries[0][0]
    ever_pass = np.zeros(first.passed.size, dtype=bool)
    ever_fail = np.zeros_like(ever_pass)
    trying = np.ones_like(ever_pass)
    used = np.zeros(first.passed.size)
    for found, weak, peeked in tries:
        passed, failed, _ = _acted(found, weak, peeked, policy)
        used += trying
        ever_pass |= trying & passed
        ever_fail |= trying & failed
        trying &= ~passed & ~failed
    return float(ever_pass.mean()), float(ever_fail.mean()), float(used.mean())


def _carrying_engagement(
    parsed: G3Terms,
    stream: np.ndarray,
    margins: np.ndarray,
    floors: np.ndarray,
    attempts: int,
    policy: str,
    judged: dict[tuple[int, int], tuple[GateOutcome, np.ndarray, np.ndarray]],
) -> tuple[float, float, float]:
    """As `_engagement`, with each attempt left inconclusive (run to its last look, not
    canceled) carrying every repetition of its chain into the next (attempt_plan's looks on the
    union); a canceled, passed or failed attempt ends the chain. Each gate's attempt k is
    judged on the carried count its own history left it. `judged` keeps each (attempt, chain)
    outcome for the scenario's other policies: they differ only in which gates read it."""
    gates, cells, _ = stream.shape
    block = parsed.max_repetitions
    carried = np.zeros(gates, dtype=int)  # blocks carried into the current attempt
    ever_pass = np.zeros(gates, dtype=bool)
    ever_fail = np.zeros_like(ever_pass)
    trying = np.ones_like(ever_pass)
    used = np.zeros(gates)
    for attempt in range(attempts):
        passed, failed, canceled = (np.zeros(gates, dtype=bool) for _ in range(3))
        for chain in range(attempt + 1):
            mine = trying & (carried == chain)
            if not mine.any():
                continue
            if (attempt, chain) not in judged:
                plan = attempt_plan(parsed, cells, chain * block)
                union = stream[:, :, (attempt - chain) * block : (attempt + 1) * block]
                draw = summarize_draw(parsed, union, plan)
                found = gate_outcome(draw.walk(margins, plan, floors), plan)
                weak = (draw.summaries[0].mean + margins[None, :] < 0).any(axis=1)
                # The peek: the carried repetitions and this attempt's first one.
                peeked = _looks_weak(union[:, :, : chain * block + 1], margins)
                judged[(attempt, chain)] = (found, weak, peeked)
            acted = _acted(*judged[(attempt, chain)], policy)
            for target, values in zip((passed, failed, canceled), acted, strict=True):
                target[mine] = values[mine]
        used += trying
        ever_pass |= trying & passed
        ever_fail |= trying & failed
        left_open = trying & ~passed & ~failed
        carried = np.where(left_open & ~canceled, carried + 1, 0)
        trying = left_open
    return float(ever_pass.mean()), float(ever_fail.mean()), float(used.mean())
