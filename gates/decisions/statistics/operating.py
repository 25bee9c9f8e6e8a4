"""The operating characteristic of a G3 spec: before it is signed, what it can decide. For a
given noise (the G2 A/A sd of log-ratios, or a stated coefficient of variation), the chance of
pass, fail and inconclusive against the true effect, per clause and for the gate, the expected
repetitions and host hours, the engagement's error under cancel and reset policies, and a
warning where the power at the vendor's claimed effect is below what the spec wants.
Simulated with the engine's own sequential walk on arm-level noise (cells sharing an arm move
together), seeded and vectorized; each probability carries its Wilson 95 % half-width.
Pure: a typed spec in, a typed JSON-able document out; imports no Django and does no I/O.
"""

from __future__ import annotations

import math

import numpy as np

from documents.characteristic import (
    ClauseCharacteristic,
    EffectRow,
    GateCharacteristic,
    NoCharacteristic,
    OperatingCharacteristic,
)
from documents.spec import G3Spec
from gates.decisions.clauses import (
    Clause,
    G3Terms,
    change_to_ratio,
    log_ratio_terms,
    parse_g3_spec,
    ratio_to_change,
)
from gates.decisions.statistics.budget import lifetime_rows
from gates.decisions.statistics.inference import SequentialPlan
from gates.decisions.statistics.simulation import (
    GateDraw,
    cells_of,
    draw_gate,
    gate_outcome,
    summarize,
)
from gates.decisions.statistics.spread import sd_floor, sd_from_cv

DEFAULT_MIN_POWER = 0.8
DEFAULT_GATES = 20_000
# True effects shown per clause, as distances from the bar in sd of one repetition's log-ratio.
STEPS_IN_SD = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)
# "Certain to pass": a cell this many sd of one log-ratio above its bar.
CLEAR_SD = 10.0

__all__ = ["DEFAULT_GATES", "gate_plan", "operating_characteristic", "sd_from_cv"]


def operating_characteristic(
    spec: G3Spec,
    *,
    sd_log_ratio: float | None = None,
    noise_source: str | None = None,
    hours_per_repetition: float | None = None,
    gates: int = DEFAULT_GATES,
    seed: int = 13,
    lifetime: bool = True,
) -> OperatingCharacteristic | NoCharacteristic:
    """What the spec decides at this noise; the spec's `statistics.noise_cv_pct` when no
    measured sd is given. `available` is False (and says why) when neither is known."""
    parsed = log_ratio_terms(parse_g3_spec(spec))
    if not parsed.clauses:
        return {"available": False, "reason": "the spec's clauses are all goodput floors"}
    rules = spec.get("statistics") or {}
    stated = rules.get("noise_cv_pct")
    measured = sd_log_ratio is not None
    if sd_log_ratio is None:
        if stated is None:
            return {"available": False, "reason": "no noise known: run G2, or state noise_cv_pct"}
        sd_log_ratio = sd_from_cv(stated)
        noise_source = f"the spec's stated CV {stated:g} %" + (
            f" ({rules['noise_source']})" if rules.get("noise_source") else ""
        )
    sd = max(sd_log_ratio, parsed.statistics.sd_floor)
    plan = gate_plan(parsed)
    rng = np.random.default_rng(seed)
    min_power = rules.get("min_power", DEFAULT_MIN_POWER)
    floors = cell_floors(parsed, sd if measured else None)
    draw = draw_gate(parsed, plan, sd, gates, rng)
    clauses = [_clause_rows(clause, parsed, plan, sd, draw, floors) for clause in parsed.clauses]
    gate = _gate_rows(parsed, plan, sd, draw, floors, hours_per_repetition)
    if lifetime:
        scenarios = {"every cell at its bar": np.zeros(draw.cells), **_one_at_bar(parsed, sd)}
        gate["lifetime"] = lifetime_rows(
            parsed, plan, sd, scenarios, gates=gates, rng=rng, floors=floors
        )
    return {
        "available": True,
        "noise": {"sd_log_ratio": sd, "source": noise_source or "given"},
        "plan": {"looks": list(plan.looks), "attempts": plan.attempts, "cells": plan.cells},
        "simulated_gates": gates,
        "min_power": min_power,
        "clauses": clauses,
        "gate": gate,
        "warnings": _warnings(clauses, gate, min_power, declared=plan.alpha / 2),
    }


def gate_plan(
    parsed: G3Terms, max_repetitions: int | None = None, paths: int | None = None
) -> SequentialPlan:
    return SequentialPlan(
        parsed.min_repetitions,
        max_repetitions or parsed.max_repetitions,
        parsed.confidence,
        attempts=parsed.statistics.attempts,
        cells=len(cells_of(parsed)),
        paths=paths,
    )


def cell_floors(parsed: G3Terms, measured: float | None) -> np.ndarray:
    """The engine's floor per cell: with a measured noise (G2) as its reference, or with the
    spec's stated CV before G2."""
    return np.array(
        [
            sd_floor(
                parsed,
                clause,
                None if measured is None else {"metric": clause.metric, "sd_log_ratio": measured},
            )
            for clause, _ in cells_of(parsed)
        ]
    )


def _margin(clause: Clause, value: float) -> float:
    """A true effect in clause units as the log margin from the bar (positive passes)."""
    ratio = change_to_ratio(clause.change, value)
    sign = -1.0 if clause.change == "reduction" else 1.0
    return sign * (math.log(ratio) - math.log(clause.bound_ratio))


def effect_at_margin(clause: Clause, margin: float) -> float:
    """The effect, in the clause's own units, that lies `margin` (log) past its bar."""
    sign = -1.0 if clause.change == "reduction" else 1.0
    return ratio_to_change(clause.change, math.exp(sign * margin + math.log(clause.bound_ratio)))


def claimed_margins(parsed: G3Terms) -> np.ndarray:
    """Every cell at its clause's claimed effect (at its bar where a clause claims none)."""
    return np.array(
        [
            0.0 if clause.claimed is None else _margin(clause, clause.claimed)
            for clause, _ in cells_of(parsed)
        ]
    )


def _clause_rows(
    clause: Clause,
    parsed: G3Terms,
    plan: SequentialPlan,
    sd: float,
    draw: GateDraw,
    floors: np.ndarray,
) -> ClauseCharacteristic:
    """The clause's cells at each true effect; the gate's other cells taken as clear."""
    members = np.array([i for i, (c, _) in enumerate(cells_of(parsed)) if c is clause])
    part = draw.subset(members)
    claim = None if clause.claimed is None else _margin(clause, clause.claimed)
    rows: list[EffectRow] = []
    for margin in sorted({*(step * sd for step in STEPS_IN_SD), *([claim] if claim else [])}):
        if clause.change == "reduction" and effect_at_margin(clause, margin) >= 100:
            continue
        outcome = part.walk(np.full(len(members), margin), plan, floors[members])
        found = summarize(gate_outcome(outcome, plan), outcome)
        rows.append({"true": effect_at_margin(clause, margin), "claimed": margin == claim, **found})
    at_claim = next((row for row in rows if row["claimed"]), None)
    return {
        "clause": clause.index,
        "metric": clause.metric,
        "compare": clause.compare,
        "change": clause.change,
        "tiers": list(clause.tiers),
        "threshold": clause.threshold,
        "claimed": clause.claimed,
        "rows": rows,
        "power_at_claim": at_claim["pass"] if at_claim else None,
    }


def _gate_rows(
    parsed: G3Terms,
    plan: SequentialPlan,
    sd: float,
    draw: GateDraw,
    floors: np.ndarray,
    hours: float | None,
) -> GateCharacteristic:
    claims = draw.walk(claimed_margins(parsed), plan, floors)
    found = summarize(gate_outcome(claims, plan), claims)
    bars = draw.walk(np.zeros(draw.cells), plan, floors)
    host_hours = None if hours is None else found["repetitions"] * hours
    return {
        "at_claims": {**found, "host_hours": host_hours},
        "at_bars": summarize(gate_outcome(bars, plan), bars),
    }


def _one_at_bar(parsed: G3Terms, sd: float) -> dict[str, np.ndarray]:
    """The least favourable case for a false pass: one cell at its bar, the rest certain."""
    margins = np.full(len(cells_of(parsed)), CLEAR_SD * sd)
    margins[0] = 0.0
    return {"one cell at its bar, the others certain to pass": margins}


def _warnings(
    clauses: list[ClauseCharacteristic],
    gate: GateCharacteristic,
    min_power: float,
    *,
    declared: float,
) -> list[str]:
    """What the signers should know: low power, and an error row above its declared rate.
    `declared` is one attempt's error per side (the plan's alpha / 2)."""
    warnings = [
        f"clause {row['clause']} ({row['metric']} {row['compare']} {row['change']}) states no "
        "claimed effect: the gate's power is shown with it at its bar"
        for row in clauses
        if row["claimed"] is None
    ]
    warnings += [
        f"clause {row['clause']} ({row['metric']} {row['compare']} {row['change']}): "
        f"{row['power_at_claim']:.0%} chance to pass at the claimed effect, under the "
        f"{min_power:.0%} the spec wants"
        for row in clauses
        if row["power_at_claim"] is not None and row["power_at_claim"] < min_power
    ]
    power = gate["at_claims"]["pass"]
    if power < min_power:
        warnings.append(
            f"the gate passes {power:.0%} of the time with every clause at its claimed effect, "
            f"under the {min_power:.0%} the spec wants: more repetitions, a quieter host or "
            "bars further from the claims"
        )
    return warnings + _error_warnings(gate, declared)


def _error_warnings(gate: GateCharacteristic, declared: float) -> list[str]:
    """An error row above its declared rate by more than its own sampling error (Wilson 95 %):
    within it, the excess may be the simulation's noise, and no warning is due."""
    at_bars, widths = gate["at_bars"], gate["at_bars"]["half_width_95"]
    name = "every clause exactly at its bar, one attempt"
    rows = [(name, "passes", at_bars["pass"], widths["pass"], declared)]
    rows += [(name, "fails", at_bars["fail"], widths["fail"], declared)]
    for row in gate.get("lifetime", []):
        name = f"{row['scenario']}, {row['policy_text']}, whole engagement"
        rows += [(name, "passes", row["pass"], row["half_width_95"]["pass"], row["declared"])]
        rows += [(name, "fails", row["fail"], row["half_width_95"]["fail"], row["declared"])]
    return [
        f"{name}: the gate {verb} {value:.2%} +- {width:.2%} of the time, above the declared "
        f"{limit:.2%} by more than its sampling error"
        for name, verb, value, width, limit in rows
        if value - width > limit
    ]
