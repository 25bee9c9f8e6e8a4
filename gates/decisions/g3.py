"""G3 performance: every clause at every tier as a paired log-ratio interval against its bar,
the validity checks before any clause, and the sequential re-run plan.
Pure: plain data in, JSON-able dicts out; no Django, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np
from scipy import stats

from gates.decisions.clauses import Clause, parse_g3_spec, ratio_to_change
from gates.decisions.inference import (
    VERDICT_NAMES,
    SequentialPlan,
    clause_margins,
    decide_sequentially,
    t_interval,
)
from gates.decisions.numbers import finite_float, is_number, metric_value
from gates.decisions.validity import (
    EvidenceError,
    Measurement,
    check_validity,
    parse_context,
    parse_measurements,
    summarize_unknowns,
)

_UNITS = {"reduction": " %", "gain": " %", "ratio": "x"}


def decide_g3(spec: dict, measurements: Any, context: Any = None) -> dict:
    """The G3 verdict, every clause at every tier, the validity checks and the next step.

    Raises EvidenceError for malformed measurements.
    Missing, non-finite or non-positive metric values are not errors: the pair is dropped and
    said (cell `dropped`, gate `notes`), and a cell left without enough pairs is inconclusive.
    """
    parsed = parse_g3_spec(spec)
    items = parse_measurements(measurements, parsed)
    facts = parse_context(context)
    checks = check_validity(items, parsed, facts)
    plan = SequentialPlan(parsed.min_repetitions, parsed.max_repetitions, parsed.confidence)
    cells = [
        _not_evaluated(clause, tier, facts["unavailable_arms"])
        or _decide_cell(clause, tier, items, plan)
        for clause in parsed.clauses
        for tier in clause.tiers
    ]
    broken = [check["reason"] for check in checks if check["ok"] is False]
    for cell in cells if broken else []:
        cell["verdict"], cell["cause"] = (
            "invalid",
            "not judged: the measurements broke validity rules",
        )
    verdict, reasons = _g3_verdict(cells, broken)
    return {
        "gate": "G3",
        "spec_version": parsed.version,
        "verdict": verdict,
        "reasons": reasons,
        "notes": summarize_unknowns(checks) + _dropped_notes(cells),
        "clauses": cells,
        "validity": checks,
        "plan": _next_step(verdict, cells, plan, items),
        "inputs": {
            "arms": parsed.arms,
            "tiers": list(parsed.tiers),
            "plan": plan.as_dict(),
            "validity_limits": asdict(parsed.validity),
            "context": facts,
            "repetitions_seen": sorted({item.repetition for item in items}),
        },
    }


def _not_evaluated(clause: Clause, tier: int, unavailable: dict[str, str]) -> dict | None:
    """A clause on an arm the host cannot run is not judged: never a pass, never a fail."""
    role = next((role for role in (clause.a, clause.b) if role in unavailable), None)
    if role is None:
        return None
    return {
        "clause": clause.index,
        "metric": clause.metric,
        "compare": clause.compare,
        "change": clause.change,
        "tier": tier,
        "threshold": clause.threshold,
        "better": clause.better,
        "pairs": [],
        "dropped": [],
        **_no_numbers(clause, 0),
        "verdict": "inconclusive",
        "not_evaluated": True,
        "cause": f"not evaluated: the {role} arm {unavailable[role]}",
    }


def _decide_cell(clause: Clause, tier: int, items: list[Measurement], plan: SequentialPlan) -> dict:
    pairs, dropped = _pairs(clause, tier, items, plan.max_repetitions)
    cell = {
        "clause": clause.index,
        "metric": clause.metric,
        "compare": clause.compare,
        "change": clause.change,
        "tier": tier,
        "threshold": clause.threshold,
        "better": clause.better,
        "pairs": pairs,
        "dropped": dropped,
    }
    if len(pairs) < 2:
        cause = f"{len(pairs)} complete pair(s) of {clause.compare}; an interval needs at least 2"
        return {
            **cell,
            **_no_numbers(clause, len(pairs)),
            "verdict": "inconclusive",
            "cause": cause,
        }
    logs = np.array([pair["log_ratio"] for pair in pairs])
    verdict, look, alpha, found = _judge(
        clause_margins(logs, clause.change, clause.bound_ratio), plan
    )
    numbers = _numbers(clause, found, look or len(pairs), alpha)
    if look is None:
        cause = f"{len(pairs)} complete pairs; the plan's first look is at {plan.looks[0]}"
    else:
        cause = _cause(verdict, clause, numbers, plan, len(pairs))
    return {**cell, **numbers, "look": look, "verdict": verdict, "cause": cause}


def _judge(margins: np.ndarray, plan: SequentialPlan) -> tuple[str, int | None, float, list]:
    """Verdict, deciding look (None before the first), its alpha and (mean, sd, low, high)."""
    if len(margins) < plan.looks[0]:
        # Shown for information only: no verdict before the plan's first look.
        found = [float(value) for value in t_interval(margins, plan.look_alphas[0])]
        return "inconclusive", None, plan.look_alphas[0], found
    outcome = decide_sequentially(margins[np.newaxis, :], plan)
    index = int(outcome.look[0])
    found = [float(values[0]) for values in (outcome.mean, outcome.sd, outcome.low, outcome.high)]
    verdict = VERDICT_NAMES[int(outcome.verdict[0])]
    return verdict, plan.looks[index], plan.look_alphas[index], found


def _pairs(
    clause: Clause, tier: int, items: list[Measurement], budget: int
) -> tuple[list[dict], list[str]]:
    by_key = {(item.arm, item.repetition): item for item in items if item.tier == tier}
    repetitions = sorted({rep for arm, rep in by_key if arm in (clause.a, clause.b)})
    pairs: list[dict] = []
    dropped: list[str] = []
    for rep in repetitions:
        first, second = by_key.get((clause.a, rep)), by_key.get((clause.b, rep))
        if first is None or second is None:
            absent = clause.a if first is None else clause.b
            dropped.append(f"repetition {rep}: no measurement of arm {absent}")
            continue
        a, b = _metric(first, clause.metric), _metric(second, clause.metric)
        if a is None or b is None:
            bad = first if a is None else second
            dropped.append(
                f"repetition {rep}: {clause.metric} of arm {bad.arm} is missing or not a "
                "positive finite number"
            )
            continue
        # log(a) - log(b), not log(a / b): the quotient of extreme values can overflow.
        pairs.append({"repetition": rep, "a": a, "b": b, "log_ratio": math.log(a) - math.log(b)})
    for pair in pairs[budget:]:
        dropped.append(f"repetition {pair['repetition']}: beyond repetitions.max ({budget})")
    return pairs[:budget], dropped


def _metric(item: Measurement, name: str) -> float | None:
    value = metric_value(item.metrics, name)
    if value is None:
        return None
    if not is_number(value):
        raise EvidenceError(f"measurements[{item.index}].metrics", f"{name} is not a number")
    number = finite_float(value)
    return number if number is not None and number > 0 else None


def _no_numbers(clause: Clause, size: int) -> dict:
    empty = {"estimate": None, "low": None, "high": None}
    return {
        **empty,
        "n": size,
        "confidence_at_look": None,
        "look": None,
        "ratio": {**empty, "bound": clause.bound_ratio},
        "log_ratio": {"mean": None, "sd": None, "t_quantile": None},
    }


def _numbers(clause: Clause, found: list[float], size: int, alpha: float) -> dict:
    """The margin interval (mean, sd, low, high) turned back into ratio and clause units."""
    mean, sd, low, high = found
    bound = math.log(clause.bound_ratio)
    sign = -1.0 if clause.change == "reduction" else 1.0
    logs = (sign * mean + bound, *sorted((sign * low + bound, sign * high + bound)))
    ratios = [_exp(value) for value in logs]
    units = [_in_units(clause.change, ratio) for ratio in ratios]
    # Beyond float range in clause units: say unknown for all three rather than mix.
    estimate, low_unit, high_unit = (
        (units[0], *sorted(units[1:])) if None not in units else (None, None, None)
    )
    ratio = dict(zip(("estimate", "low", "high"), ratios, strict=True))
    t_quantile = float(stats.t.isf(alpha / 2, size - 1))
    return {
        "estimate": estimate,
        "low": low_unit,
        "high": high_unit,
        "n": size,
        "confidence_at_look": 1 - alpha,
        "ratio": {**ratio, "bound": clause.bound_ratio},
        "log_ratio": {"mean": logs[0], "sd": sd, "t_quantile": t_quantile},
    }


def _exp(value: float) -> float | None:
    # A huge log-ratio overflows exp(); report it as unknown rather than inf (JSON has no inf).
    try:
        return math.exp(value)
    except OverflowError:
        return None


def _in_units(change: str, ratio: float | None) -> float | None:
    value = None if ratio is None else ratio_to_change(change, ratio)
    return value if value is not None and math.isfinite(value) else None


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _cause(verdict: str, clause: Clause, numbers: dict, plan: SequentialPlan, pairs: int) -> str:
    unit = _UNITS[clause.change]
    interval = f"[{_show(numbers['low'])}, {_show(numbers['high'])}]{unit}"
    threshold = f"the threshold {clause.threshold:g}{unit}"
    confidence = numbers["confidence_at_look"]
    where = f"at the look after {numbers['n']} repetitions (confidence {confidence:.4f})"
    if verdict == "pass":
        return f"interval {interval} clears {threshold} {where}"
    if verdict == "fail":
        return f"interval {interval} lies wholly short of {threshold} {where}"
    upcoming = plan.next_look(pairs)
    then = f"next planned look at {upcoming}" if upcoming else "no planned look left"
    return f"interval {interval} straddles {threshold} {where}; {then}"


def _describe(cell: dict) -> str:
    return f"{cell['metric']} {cell['compare']} {cell['change']} at tier {cell['tier']}"


def _dropped_notes(cells: list[dict]) -> list[str]:
    return [f"{_describe(cell)}: {reason}" for cell in cells for reason in cell["dropped"]]


def _g3_verdict(cells: list[dict], broken: list[str]) -> tuple[str, list[str]]:
    if broken:
        return "invalid", broken
    failed = [f"{_describe(cell)}: {cell['cause']}" for cell in cells if cell["verdict"] == "fail"]
    if failed:
        return "fail", failed
    if cells and all(cell["verdict"] == "pass" for cell in cells):
        return "pass", [f"all {len(cells)} clause cells passed"]
    return "inconclusive", [
        f"{_describe(cell)}: {cell['cause']}" for cell in cells if cell["verdict"] != "pass"
    ]


def _next_step(
    verdict: str, cells: list[dict], plan: SequentialPlan, items: list[Measurement]
) -> dict:
    if verdict != "inconclusive":
        return {"action": "decide", "more": 0, "reason": f"the gate is decided: {verdict}"}
    done = len({item.repetition for item in items})
    room = plan.max_repetitions - done
    needs = [
        upcoming - len(cell["pairs"])
        for cell in cells
        if cell["verdict"] == "inconclusive"
        and not cell.get("not_evaluated")
        and (upcoming := plan.next_look(len(cell["pairs"]))) is not None
    ]
    if room > 0 and not needs:
        why = "the undecided clause cells cannot be evaluated on this host; more runs cannot help"
        return {"action": "decide", "more": 0, "reason": why}
    if room <= 0 or not needs:
        why = f"the budget of {plan.max_repetitions} repetitions is spent; the gate is inconclusive"
        return {"action": "decide", "more": 0, "reason": why}
    more = min(min(needs), room)
    open_cells = sum(cell["verdict"] == "inconclusive" for cell in cells)
    why = f"{open_cells} clause cell(s) undecided after {done} repetition(s); run {more} more"
    return {"action": "run", "more": more, "reason": why}
