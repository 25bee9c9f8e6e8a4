"""G3 performance: every clause at every tier as a paired log-ratio interval against its bar (a
goodput floor: one arm's share of requests within the SLO against its bar, cells/floors.py),
the validity checks before any clause, the error budget of the attempt, and the re-run plan;
with a replayed trace, each offload cell's hit rate against the planner's band (advisory).
Pure: a typed spec and plain measurements in, a typed decision out; no Django, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from documents.cell import (
    G3Cell,
    G3Context,
    NextStep,
    Pair,
    ShareRepetition,
    ValidityCheck,
)
from documents.decision import G3Decision, Verdict
from documents.spec import G3Spec
from gates.decisions.cells import build as cells
from gates.decisions.cells import floors
from gates.decisions.cells.bands import g3_band_rows, parse_g3_bands
from gates.decisions.cells.ttft_bands import parse_g3_ttft_bands
from gates.decisions.cells.ttft_changes import g3_ttft_advisory_rows
from gates.decisions.clauses import Clause, G3Terms, parse_g3_spec
from gates.decisions.goodput import BenchShare
from gates.decisions.numbers import finite_float, is_number, metric_value
from gates.decisions.statistics.budget import attempt_plan
from gates.decisions.statistics.inference import (
    SequentialPlan,
    clause_margins,
    decide_cells,
)
from gates.decisions.statistics.outliers import (
    screen_checks,
    set_aside_disturbed,
    set_aside_notes,
)
from gates.decisions.statistics.spread import reference_noise, sd_floor, spread_check
from gates.decisions.statistics.steps import step_checks
from gates.decisions.validity import (
    EvidenceError,
    Measurement,
    check_validity,
    parse_context,
    parse_measurements,
    summarize_unknowns,
)


def decide_g3(spec: G3Spec, measurements: Any, context: Any = None) -> G3Decision:
    """The G3 verdict, every clause at every tier, the validity checks and the next step.

    Raises EvidenceError for malformed measurements.
    Missing, non-finite or non-positive metric values are not errors: the pair is dropped and
    said (cell `dropped`, gate `notes`), and a cell left without enough pairs is inconclusive.
    """
    parsed = parse_g3_spec(spec)
    items = parse_measurements(measurements, parsed)
    facts = parse_context(context)
    bands = parse_g3_bands(context)
    if bands is not None:  # a replayed trace: its offload cells against the planner's band
        facts["replay_external_bands"] = bands
    ttft_bands = parse_g3_ttft_bands(context)
    if ttft_bands is not None:  # ... and their TTFT p50 against the planner's run of the replay
        facts["replay_ttft_predictions"] = ttft_bands
    checks = check_validity(items, parsed, facts)
    keys = [(clause, tier) for clause in parsed.clauses for tier in clause.tiers]
    unavailable = facts["unavailable_arms"]
    # Cells on an arm this host cannot run are not judged, so they are not in the family the
    # fail side is corrected over either.
    judged = [(clause, tier) for clause, tier in keys if not _missing_role(clause, unavailable)]
    plan = attempt_plan(parsed, max(1, len(judged)), _carried(parsed, facts))
    checks += _screen(parsed, judged, items, facts)
    found_steps, untested = _steps(parsed, items)
    checks += found_steps
    aside = set_aside_disturbed(checks, parsed.statistics.max_reruns)
    kept = [item for item in items if item.repetition not in aside]
    floors, pool = _sd_floors(parsed, judged, facts), parsed.statistics.pool_tiers
    decided = iter(_decide_cells(judged, kept, plan, floors, pool_tiers=pool) if judged else [])
    cells = [_not_evaluated(clause, tier, unavailable) or next(decided) for clause, tier in keys]
    for cell in cells:
        cell["dropped"] += [f"repetition {rep}: set aside and re-run (disturbed)" for rep in aside]
    checks += _spread_checks(parsed, judged, cells, facts)
    broken = [
        check["reason"] for check in checks if check["ok"] is False and not check.get("set_aside")
    ]
    spent = _attempts_spent(parsed, facts)
    not_judged = "not judged: the measurements broke validity rules" if broken else spent
    if not_judged:
        for cell in cells:
            cell["verdict"] = "invalid" if broken else "inconclusive"
            cell["cause"] = not_judged
    verdict, reasons = _g3_verdict(cells, broken, spent)
    band_rows, band_notes = g3_band_rows(bands or [], parsed.arms, kept)
    ttft_rows, changes, ttft_notes = g3_ttft_advisory_rows(ttft_bands or [], parsed, kept)
    decision: G3Decision = {
        "gate": "G3",
        "spec_version": parsed.version,
        "verdict": verdict,
        "reasons": reasons,
        "notes": summarize_unknowns(checks)
        + untested
        + set_aside_notes(aside)
        + _dropped_notes(cells)
        + band_notes
        + ttft_notes,
        "clauses": cells,
        "validity": checks,
        "set_aside": [{"repetition": rep, "reasons": why} for rep, why in aside.items()],
        "plan": _next_step(verdict, cells, plan, items, spent, reruns=len(aside)),
        "inputs": {
            "arms": parsed.arms,
            "tiers": list(parsed.tiers),
            "plan": plan.as_dict(),
            "attempt": facts["attempt"],
            "statistics": parsed.statistics.as_document(),
            "validity_limits": parsed.validity.as_document(),
            "context": facts,
            "repetitions_seen": sorted({item.repetition for item in items}),
        },
    }
    if bands is not None:  # advisory rows, never read by the verdict above
        decision["replay_bands"] = band_rows
    if ttft_bands is not None:
        decision["replay_ttft_bands"] = ttft_rows
    if changes is not None:  # only a context whose bands carry the change
        decision["replay_ttft_changes"] = changes
    return decision


def _carried(parsed: G3Terms, facts: G3Context) -> int:
    carried = facts.get("carried_repetitions", 0)
    if carried and not parsed.statistics.carry_repetitions:
        raise EvidenceError(
            "context.carried_repetitions", "the spec does not carry repetitions between attempts"
        )
    return carried


def _attempts_spent(parsed: G3Terms, facts: G3Context) -> str | None:
    allowed = parsed.statistics.attempts
    if facts["attempt"] <= allowed:
        return None
    return (
        f"attempt {facts['attempt']} of {allowed} allowed: the spec's error budget is spent "
        "on earlier attempts, so this one cannot decide"
    )


def _missing_role(clause: Clause, unavailable: dict[str, str]) -> str | None:
    return next((role for role in (clause.a, clause.b) if role in unavailable), None)


def _not_evaluated(clause: Clause, tier: int, unavailable: dict[str, str]) -> G3Cell | None:
    """A clause on an arm the host cannot run is not judged: never a pass, never a fail."""
    role = _missing_role(clause, unavailable)
    if role is None:
        return None
    return cells.not_evaluated_cell(
        clause, tier, role, f"not evaluated: the {role} arm {unavailable[role]}"
    )


def _sd_floors(parsed: G3Terms, keys: list[tuple[Clause, int]], facts: G3Context) -> np.ndarray:
    """Per cell: the spec's resolution floor, raised by the reference noise (spread.sd_floor)."""
    return np.array([sd_floor(parsed, clause, facts["noise_floor"]) for clause, _ in keys])


def _screen(
    parsed: G3Terms, judged: list[tuple[Clause, int]], items: list[Measurement], facts: G3Context
) -> list[ValidityCheck]:
    """With `statistics.outliers.screen_level`: the robust screen over each judged cell."""
    level = parsed.statistics.screen_level
    if level is None:
        return []
    cells = []
    for clause, tier in _ratio_cells(judged):
        pairs, _ = _pairs(clause, tier, items, parsed.max_repetitions)
        cells.append(
            (
                f"{clause.metric} {clause.compare}",
                tier,
                [pair["repetition"] for pair in pairs],
                [pair["log_ratio"] for pair in pairs],
                reference_noise(parsed, clause, facts["noise_floor"]),
            )
        )
    return screen_checks(cells, level)


def _steps(parsed: G3Terms, items: list[Measurement]) -> tuple[list[ValidityCheck], list[str]]:
    """With `statistics.outliers.step_level`: each bench's TTFTs in send order, tested for a
    level shift; a bench whose file has no per-request TTFTs is named, never guessed at."""
    level = parsed.statistics.step_level
    if level is None:
        return [], []
    benches = [
        (item.arm, item.tier, item.repetition, _request_ttfts(item))
        for item in items
        if item.arm in parsed.arms
    ]
    return step_checks(benches, level)


def _request_ttfts(item: Measurement) -> list[float | None] | None:
    """The bench's per-request TTFTs in the order the requests were sent (vllm-bench's arrays
    follow its send order; a replay's are sorted by send time), or None where it kept none."""
    requests = item.metrics.get("per_request")
    values = requests.get("ttft_ms") if isinstance(requests, dict) else None
    if not isinstance(values, list):
        return None
    return [finite_float(v) if is_number(v) else None for v in values]


def _spread_checks(
    parsed: G3Terms, judged: list[tuple[Clause, int]], cells: list[G3Cell], facts: G3Context
) -> list[ValidityCheck]:
    """With `statistics.spread_level`: each judged cell's spread against the reference noise."""
    level = parsed.statistics.spread_level
    if level is None:
        return []
    by_key = {(cell["clause"], cell["tier"]): cell for cell in cells}
    found = []
    for clause, tier in _ratio_cells(judged):
        logs = [pair["log_ratio"] for pair in by_key[(clause.index, tier)]["pairs"]]
        reference = reference_noise(parsed, clause, facts["noise_floor"])
        check = spread_check(clause, tier, logs, reference, level)
        if check is not None:
            found.append(check)
    return found


def _ratio_cells(keys: list[tuple[Clause, int]]) -> list[tuple[Clause, int]]:
    """The cells of log-ratios: a goodput floor's spread is a share's, not a ratio's noise."""
    return [(clause, tier) for clause, tier in keys if not clause.floor]


def _decide_cells(
    keys: list[tuple[Clause, int]],
    items: list[Measurement],
    plan: SequentialPlan,
    floors_at: np.ndarray,
    *,
    pool_tiers: bool = False,
) -> list[G3Cell]:
    found = [_repetitions(clause, tier, items, plan.max_repetitions) for clause, tier in keys]
    counts = np.array([len(pairs) + len(shares) for pairs, shares, _ in found])
    margins = np.full((1, len(keys), plan.max_repetitions), np.nan)
    sd_floors = np.array(floors_at, dtype=float)
    for row, ((clause, _), (pairs, shares, _)) in enumerate(zip(keys, found, strict=True)):
        if clause.floor:
            # A floor's sd floor is its shares' binomial noise, not the spec's for log-ratios.
            margins[0, row, : len(shares)] = floors.floor_margins(clause, shares)
            sd_floors[row] = floors.floor_sd(clause, shares)
            continue
        logs = np.array([pair["log_ratio"] for pair in pairs])
        margins[0, row, : len(pairs)] = clause_margins(logs, clause.change, clause.bound_ratio)
    # The tiers of one clause may share a pooled sd; the spec says whether they may (a floor's
    # tiers hold different shares, so never: -1 pools with nothing).
    groups = (
        np.array([-1 if clause.floor else clause.index for clause, _ in keys])
        if pool_tiers
        else None
    )
    outcome = decide_cells(margins, plan, sd_floor=sd_floors, counts=counts, groups=groups)
    return [
        cells.floor_cell(clause, tier, shares, dropped, plan, outcome, row, sd_floors[row])
        if clause.floor
        else cells.ratio_cell(clause, tier, pairs, dropped, plan, outcome, row, sd_floors[row])
        for row, ((clause, tier), (pairs, shares, dropped)) in enumerate(
            zip(keys, found, strict=True)
        )
    ]


def _repetitions(
    clause: Clause, tier: int, items: list[Measurement], budget: int
) -> tuple[list[Pair], list[ShareRepetition], list[str]]:
    if clause.floor:
        shares, dropped = floors.floor_shares(clause, tier, items, budget)
        return [], shares, dropped
    pairs, dropped = _pairs(clause, tier, items, budget)
    return pairs, [], dropped


def _pairs(
    clause: Clause, tier: int, items: list[Measurement], budget: int
) -> tuple[list[Pair], list[str]]:
    by_key = {(item.arm, item.repetition): item for item in items if item.tier == tier}
    repetitions = sorted({rep for arm, rep in by_key if arm in (clause.a, clause.b)})
    pairs: list[Pair] = []
    dropped: list[str] = []
    for rep in repetitions:
        first, second = by_key.get((clause.a, rep)), by_key.get((clause.b, rep))
        if first is None or second is None:
            absent = clause.a if first is None else clause.b
            dropped.append(f"repetition {rep}: no measurement of arm {absent}")
            continue
        a, b = _metric(first, clause), _metric(second, clause)
        if a is None or b is None:
            bad = first if a is None else second
            dropped.append(
                f"repetition {rep}: {clause.metric} of arm {bad.arm} is missing or not a "
                "positive finite number"
                + (" (no per-request numbers, or no request within the SLO)" if clause.slo else "")
            )
            continue
        # log(a) - log(b), not log(a / b): the quotient of extreme values can overflow.
        log_ratio = math.log(a) - math.log(b)
        ratio = math.exp(log_ratio) if abs(log_ratio) < 700 else None
        pairs.append({"repetition": rep, "a": a, "b": b, "log_ratio": log_ratio, "ratio": ratio})
    for pair in pairs[budget:]:
        dropped.append(f"repetition {pair['repetition']}: beyond repetitions.max ({budget})")
    return pairs[:budget], dropped


def _metric(item: Measurement, clause: Clause) -> float | None:
    if clause.slo is not None:  # goodput compared between arms: each arm's share of requests
        found = floors.bench_share(item, clause)
        return found.share if isinstance(found, BenchShare) and found.met > 0 else None
    name = clause.metric
    value = metric_value(item.metrics, name)
    if value is None:
        return None
    if not is_number(value):
        raise EvidenceError(f"measurements[{item.index}].metrics", f"{name} is not a number")
    number = finite_float(value)
    return number if number is not None and number > 0 else None


def _describe(cell: G3Cell) -> str:
    slo = f" within {cell['slo']['text']}" if "slo" in cell else ""
    if cell["change"] == "floor":
        return f"goodput{slo} of {cell['compare']} (floor) at tier {cell['tier']}"
    return f"{cell['metric']}{slo} {cell['compare']} {cell['change']} at tier {cell['tier']}"


def _repetitions_used(cell: G3Cell) -> int:
    """The repetitions a cell was decided on: its pairs, or a goodput floor's shares."""
    return len(cell["goodput"]["shares"]) if "goodput" in cell else len(cell["pairs"])


def _dropped_notes(cells: list[G3Cell]) -> list[str]:
    return [f"{_describe(cell)}: {reason}" for cell in cells for reason in cell["dropped"]]


def _g3_verdict(
    cells: list[G3Cell], broken: list[str], spent: str | None
) -> tuple[Verdict, list[str]]:
    if broken:
        return "invalid", broken
    if spent:
        return "inconclusive", [spent]
    failed = [f"{_describe(cell)}: {cell['cause']}" for cell in cells if cell["verdict"] == "fail"]
    if failed:
        return "fail", failed
    if cells and all(cell["verdict"] == "pass" for cell in cells):
        return "pass", [f"all {len(cells)} clause cells passed"]
    return "inconclusive", [
        f"{_describe(cell)}: {cell['cause']}" for cell in cells if cell["verdict"] != "pass"
    ]


def _next_step(
    verdict: Verdict,
    cells: list[G3Cell],
    plan: SequentialPlan,
    items: list[Measurement],
    spent: str | None,
    *,
    reruns: int = 0,
) -> NextStep:
    if verdict != "inconclusive" or spent:
        return {"action": "decide", "more": 0, "reason": spent or f"the gate is decided: {verdict}"}
    done = len({item.repetition for item in items})
    # A repetition set aside by the outlier rule is replaced, so it does not use the budget.
    room = plan.max_repetitions + reruns - done
    needs = [
        upcoming - _repetitions_used(cell)
        for cell in cells
        if cell["verdict"] == "inconclusive"
        and not cell.get("not_evaluated")
        and (upcoming := plan.next_look(_repetitions_used(cell))) is not None
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
