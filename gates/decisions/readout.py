"""What a G3 cell shows a person: its numbers in clause units and on the ratio scale, an interval
end beyond a cap shown as "unbounded" (two repetitions at a strict look give exact but useless
bounds such as -2620670 %), the look said in words, and each repetition's ratio.
Pure: plain numbers in, JSON-able dicts and text out; imports no Django.
"""

from __future__ import annotations

import math

from gates.decisions.clauses import Clause, ratio_to_change

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
        f"at {confidence:.2%} confidence"
    )


def repetitions_text(pairs: list[dict]) -> str:
    """Each repetition's ratio, in repetition order: 'r1 0.74x, r2 0.77x'."""
    return ", ".join(f"r{pair['repetition']} {ratio_text(pair['ratio'])}" for pair in pairs)
