"""What a G3 cell shows a person: its numbers in clause units and on the ratio scale, an interval
end beyond a cap shown as "unbounded" (two repetitions at a strict look give exact but useless
bounds such as -2620670 %), the look said in words, each repetition's ratio, and why the cell
has its verdict. Pure: plain numbers in, typed documents and text out; imports no Django.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from documents.cell import CellReadout, Pair
from gates.decisions.clauses import Clause, ratio_to_change
from gates.decisions.statistics.inference import LookOutcome, SequentialPlan

# A ratio interval end beyond a factor 100 either way says nothing a reader can act on.
RATIO_CAP = 100.0
_UNITS = {"reduction": " %", "gain": " %", "ratio": "x"}


def margin_to_log_ratio(clause: Clause, margin: float) -> float:
    """A margin (distance from the bar, positive on the passing side) as log(A/B)."""
    sign = -1.0 if clause.change == "reduction" else 1.0
    return sign * margin + math.log(clause.bound_ratio)


def bounded_ratio(log_ratio: float) -> float | None:
    """exp(log_ratio), or None beyond the cap (also where exp() would overflow)."""
    if not math.isfinite(log_ratio) or abs(log_ratio) > math.log(RATIO_CAP):
        return None
    return math.exp(log_ratio)


def in_units(clause: Clause, ratio: float | None) -> float | None:
    return None if ratio is None else ratio_to_change(clause.change, ratio)


def ratio_text(ratio: float | None) -> str:
    return "unbounded" if ratio is None else f"{ratio:.3g}x"


def units_text(clause: Clause, value: float | None) -> str:
    return "unbounded" if value is None else f"{value:.3g}{_UNITS[clause.change]}"


def estimate_text(clause: Clause, ratio: float | None) -> str:
    """'0.74x (26 % reduction)'; the bare ratio for ratio clauses."""
    if clause.change == "ratio" or ratio is None:
        return ratio_text(ratio)
    return f"{ratio_text(ratio)} ({units_text(clause, in_units(clause, ratio))} {clause.change})"


def interval_text(low: float | None, high: float | None) -> str:
    """A ratio interval as text, ends beyond the cap said as unbounded."""
    if low is None and high is None:
        return "unbounded at this look"
    return f"[{ratio_text(low)}, {ratio_text(high)}]"


def look_text(index: int, looks: tuple[int, ...], confidence: float) -> str:
    return (
        f"look {index + 1} of {len(looks)}, after {looks[index]} repetitions, "
        f"at {confidence_text(confidence)} confidence"
    )


def confidence_text(confidence: float) -> str:
    """A look's confidence with the decimals it needs never to read as 100 %: an early look
    of a sequential plan holds 99.996 %, which two decimals would round up to a certainty."""
    if not math.isfinite(confidence) or confidence >= 1.0:
        return "above 99.9999%"
    gap = (1.0 - confidence) * 100  # the percentage points below 100
    places = min(6, max(2, 1 - math.floor(math.log10(gap))))
    shown = f"{confidence * 100:.{places}f}"
    return "above 99.9999%" if shown.startswith("100") else f"{shown}%"


def repetitions_text(pairs: list[Pair]) -> str:
    """Each repetition's ratio, in repetition order: 'r1 0.74x, r2 0.77x'."""
    return ", ".join(f"r{pair['repetition']} {ratio_text(pair['ratio'])}" for pair in pairs)


def before_first_look(
    clause: Clause, pairs: list[Pair], plan: SequentialPlan
) -> tuple[CellReadout, str]:
    """No interval before the first planned look: the estimate and each repetition instead."""
    size = len(pairs)
    # One pair is one measurement, not an estimate: nothing to show but the pair itself.
    mean = float(np.mean([pair["log_ratio"] for pair in pairs])) if size >= 2 else None
    ratio = None if mean is None else bounded_ratio(mean)
    first = plan.looks[0]
    if size < 2:
        cause = (
            f"{size} complete pair(s) of {clause.compare}; an interval needs at least 2 and "
            f"the plan's first look is at {first}"
        )
    else:
        cause = (
            f"no interval before the plan's first look at {first} repetitions; estimate "
            f"{estimate_text(clause, ratio)} from {size}: "
            f"{repetitions_text(pairs)}"
        )
    shown: CellReadout = {
        "estimate": in_units(clause, ratio),
        "low": None,
        "high": None,
        "n": size,
        "look": None,
        "confidence_at_look": None,
        "shown": {
            "estimate": estimate_text(clause, ratio) if mean is not None else None,
            "interval": None,
            "look": f"before the first look (at {first} repetitions)",
        },
        "ratio": {"estimate": ratio, "low": None, "high": None, "bound": clause.bound_ratio},
        "log_ratio": {"mean": mean, "sd": None, "t_quantile": None},
    }
    return shown, cause


def at_look(
    clause: Clause, outcome: LookOutcome, row: int, index: int, plan: SequentialPlan
) -> CellReadout:
    """The margin interval at the look turned back into ratio and clause units."""
    mean, sd, low, high = (
        float(values[0, row]) for values in (outcome.mean, outcome.sd, outcome.low, outcome.high)
    )
    logs = (
        margin_to_log_ratio(clause, mean),
        *sorted(margin_to_log_ratio(clause, value) for value in (low, high)),
    )
    ratios = [bounded_ratio(value) for value in logs]
    units = [in_units(clause, ratio) for ratio in ratios]
    if clause.change == "reduction":  # a reduction falls as the ratio rises
        units = [units[0], units[2], units[1]]
    critical = float(outcome.pass_critical[0, row])
    pooled = int(outcome.pooled[0, row])
    confidence = 1 - float(2 * stats.t.sf(critical, pooled * (plan.looks[index] - 1)))
    return {
        "estimate": units[0],
        "low": units[1],
        "high": units[2],
        "n": plan.looks[index],
        "look": plan.looks[index],
        "confidence_at_look": confidence,
        "shown": {
            "estimate": estimate_text(clause, ratios[0]),
            "interval": interval_text(ratios[1], ratios[2]),
            "look": look_text(index, plan.looks, confidence),
        },
        "ratio": {
            "estimate": ratios[0],
            "low": ratios[1],
            "high": ratios[2],
            "bound": clause.bound_ratio,
        },
        # sd_pooled_over: how many tiers of the clause its sd was pooled over (1: its own).
        "log_ratio": {"mean": logs[0], "sd": sd, "t_quantile": critical, "sd_pooled_over": pooled},
    }


def cell_cause(
    verdict: str,
    clause: Clause,
    numbers: CellReadout,
    plan: SequentialPlan,
    pairs: int,
    outcome: LookOutcome,
    row: int,
) -> str:
    shown = numbers["shown"]
    return sequential_cause(
        verdict,
        f"ratio interval {shown['interval']}",
        f"the bar {clause.bound_ratio:.4g}x ({units_text(clause, clause.threshold)})",
        shown["look"],
        plan,
        pairs,
        short="short of",
        fail_holm=(
            f"Holm over {plan.cells} cells, critical t {float(outcome.fail_critical[0, row]):.3g}"
        ),
        short_now=float(outcome.high[0, row]) < 0,
    )


def sequential_cause(
    verdict: str,
    said: str,
    bar: str,
    where: str,
    plan: SequentialPlan,
    size: int,
    *,
    short: str,
    fail_holm: str,
    short_now: bool,
) -> str:
    """Why a cell has its verdict, in the words every sequential cell uses (ratio cells and
    goodput floors alike): cleared, wholly short at the gate-wide fail level, short but not at
    that level, or straddling, with the next planned look."""
    if verdict == "pass":
        return f"{said} clears {bar} at {where}"
    if verdict == "fail":
        return (
            f"{said} lies wholly {short} {bar} at {where}, also at the gate-wide fail level "
            f"({fail_holm})"
        )
    upcoming = plan.next_look(size)
    then = f"next planned look at {upcoming}" if upcoming else "no planned look left"
    if short_now:
        return (
            f"{said} is {short} {bar} at {where}, but not at the gate-wide fail level "
            f"(Holm over {plan.cells} cells); {then}"
        )
    return f"{said} straddles {bar} at {where}; {then}"
