"""The operating characteristic of a G3 spec: before it is signed, what it can decide. For a
given noise (the G2 A/A sd of log-ratios, or a stated coefficient of variation), the chance of
pass, fail and inconclusive against the true effect, per clause and for the gate, the expected
repetitions and host hours, and a warning where the power at the vendor's claimed effect is
below what the spec wants. Simulated with the engine's own sequential walk (seeded, vectorized).
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
    SimulatedOutcome,
)
from documents.spec import G3Spec
from gates.decisions.clauses import Clause, G3Terms, change_to_ratio, parse_g3_spec, ratio_to_change
from gates.decisions.statistics.inference import FAIL, OPEN, PASS, SequentialPlan, decide_cells

DEFAULT_MIN_POWER = 0.8
# True effects shown per clause, as distances from the bar in sd of one repetition's log-ratio.
STEPS_IN_SD = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)


def sd_from_cv(cv_pct: float) -> float:
    """sd of log(A/B) when each arm has independent lognormal noise of this CV (percent)."""
    return math.sqrt(2 * math.log1p((cv_pct / 100) ** 2))


def operating_characteristic(
    spec: G3Spec,
    *,
    sd_log_ratio: float | None = None,
    noise_source: str | None = None,
    hours_per_repetition: float | None = None,
    gates: int = 4000,
    seed: int = 13,
) -> OperatingCharacteristic | NoCharacteristic:
    """What the spec decides at this noise; the spec's `statistics.noise_cv_pct` when no
    measured sd is given. `available` is False (and says why) when neither is known."""
    parsed = parse_g3_spec(spec)
    stated = (spec.get("statistics") or {}).get("noise_cv_pct")
    if sd_log_ratio is None:
        if stated is None:
            return {"available": False, "reason": "no noise known: run G2, or state noise_cv_pct"}
        sd_log_ratio, noise_source = sd_from_cv(stated), f"the spec's stated CV {stated:g} %"
    sd = max(sd_log_ratio, parsed.statistics.sd_floor)
    plan = _plan(parsed)
    rng = np.random.default_rng(seed)
    min_power = (spec.get("statistics") or {}).get("min_power", DEFAULT_MIN_POWER)
    pool = parsed.statistics.pool_tiers
    clauses = [_clause_rows(clause, plan, sd, gates, rng, pool) for clause in parsed.clauses]
    gate = _gate_at_claims(parsed, plan, sd, gates, rng, hours_per_repetition)
    return {
        "available": True,
        "noise": {"sd_log_ratio": sd, "source": noise_source or "given"},
        "plan": {"looks": list(plan.looks), "attempts": plan.attempts, "cells": plan.cells},
        "simulated_gates": gates,
        "min_power": min_power,
        "clauses": clauses,
        "gate": gate,
        "warnings": _warnings(clauses, gate, min_power),
    }


def _plan(parsed: G3Terms) -> SequentialPlan:
    cells = sum(len(clause.tiers) for clause in parsed.clauses)
    return SequentialPlan(
        parsed.min_repetitions,
        parsed.max_repetitions,
        parsed.confidence,
        attempts=parsed.statistics.attempts,
        cells=cells,
    )


def _simulate(
    margins: np.ndarray,
    plan: SequentialPlan,
    sd: float,
    gates: int,
    rng: np.random.Generator,
    groups: np.ndarray | None = None,
) -> SimulatedOutcome:
    """Gate outcomes for cells with these true margins (log scale, positive passes); `groups`
    the clause of each cell when the spec pools a clause's sd across its tiers."""
    noise = rng.normal(0.0, sd, (gates, len(margins), plan.max_repetitions))
    outcome = decide_cells(margins[None, :, None] + noise, plan, groups=groups)
    failed = (outcome.verdict == FAIL).any(axis=1)
    passed = (outcome.verdict == PASS).all(axis=1)
    looks = np.array(plan.looks)
    # The gate stops at the first fail, or when its last cell passed; else it runs to max.
    fail_look = np.where(outcome.verdict == FAIL, looks[outcome.look], plan.max_repetitions)
    used = np.where(
        failed,
        fail_look.min(axis=1),
        np.where(passed, looks[outcome.look].max(axis=1), plan.max_repetitions),
    )
    open_ = ~failed & ~passed & (outcome.verdict == OPEN).any(axis=1)
    return {
        "pass": float(passed.mean()),
        "fail": float(failed.mean()),
        "inconclusive": float(open_.mean()),
        "repetitions": float(used.mean()),
    }


def _margin(clause: Clause, value: float) -> float:
    """A true effect in clause units as the log margin from the bar (positive passes)."""
    ratio = change_to_ratio(clause.change, value)
    sign = -1.0 if clause.change == "reduction" else 1.0
    return sign * (math.log(ratio) - math.log(clause.bound_ratio))


def _units(clause: Clause, margin: float) -> float:
    sign = -1.0 if clause.change == "reduction" else 1.0
    return ratio_to_change(clause.change, math.exp(sign * margin + math.log(clause.bound_ratio)))


def _clause_rows(
    clause: Clause,
    plan: SequentialPlan,
    sd: float,
    gates: int,
    rng: np.random.Generator,
    pool: bool = False,
) -> ClauseCharacteristic:
    """The clause's cells at each true effect; the gate's other cells taken as clear."""
    groups = np.zeros(len(clause.tiers), dtype=int) if pool else None
    margins = [step * sd for step in STEPS_IN_SD]
    claim = None if clause.claimed is None else _margin(clause, clause.claimed)
    rows: list[EffectRow] = []
    for margin in sorted({*margins, *([claim] if claim is not None else [])}):
        if clause.change == "reduction" and _units(clause, margin) >= 100:
            continue
        found = _simulate(np.full(len(clause.tiers), margin), plan, sd, gates, rng, groups)
        rows.append({"true": _units(clause, margin), "claimed": margin == claim, **found})
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


def _gate_at_claims(
    parsed: G3Terms,
    plan: SequentialPlan,
    sd: float,
    gates: int,
    rng: np.random.Generator,
    hours: float | None,
) -> GateCharacteristic:
    """Every cell at its clause's claimed effect (at its bar where a clause claims none)."""
    margins = np.array(
        [
            0.0 if clause.claimed is None else _margin(clause, clause.claimed)
            for clause in parsed.clauses
            for _ in clause.tiers
        ]
    )
    groups = None
    if parsed.statistics.pool_tiers:
        groups = np.array([clause.index for clause in parsed.clauses for _ in clause.tiers])
    found = _simulate(margins, plan, sd, gates, rng, groups)
    at_bars = _simulate(np.zeros(len(margins)), plan, sd, gates, rng, groups)
    host_hours = None if hours is None else found["repetitions"] * hours
    return {"at_claims": {**found, "host_hours": host_hours}, "at_bars": at_bars}


def _warnings(
    clauses: list[ClauseCharacteristic], gate: GateCharacteristic, min_power: float
) -> list[str]:
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
    return warnings
