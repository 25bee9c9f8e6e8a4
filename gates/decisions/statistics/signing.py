"""Power before signing: whether a G3 spec may be signed at a noise (its gate passes at least
`min_power` of the time with every clause at its claimed effect), and, when it may not, what
would make it decisive and what that costs in host hours: more repetitions, more prompts per
bench (a p50 over more requests is less noisy), fewer clauses, or the bar the data could show.
The services refuse a signature below `min_power` unless both parties sign an acknowledgement.
Pure: a typed spec in, a typed document out; imports no Django.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from documents.characteristic import Proposal, SigningCheck
from documents.spec import G3Spec
from gates.decisions.clauses import Clause, G3Terms, log_ratio_terms, parse_g3_spec
from gates.decisions.statistics.inference import DESIGN_PATHS, PASS, SequentialPlan
from gates.decisions.statistics.operating import (
    DEFAULT_MIN_POWER,
    cell_floors,
    claimed_margins,
    effect_at_margin,
    gate_plan,
    operating_characteristic,
)
from gates.decisions.statistics.simulation import GateDraw, cells_of, draw_gate, gate_outcome
from gates.decisions.statistics.spread import sd_from_cv

MAX_REPETITIONS = 50  # the schema's cap on repetitions.max
SCAN_GATES = 4000


def signing_check(
    spec: G3Spec,
    *,
    sd_log_ratio: float | None = None,
    noise_source: str | None = None,
    hours_per_repetition: float | None = None,
    gates: int = 20_000,
) -> SigningCheck:
    """Signable when the OC's gate power at the claims reaches min_power; else proposals."""
    found = operating_characteristic(
        spec,
        sd_log_ratio=sd_log_ratio,
        noise_source=noise_source,
        hours_per_repetition=hours_per_repetition,
        gates=gates,
        lifetime=False,
    )
    if not found["available"]:
        return {
            "signable": False,
            "power": None,
            "min_power": None,
            "reason": found["reason"],
            "proposals": [],
        }
    at_claims = found["gate"]["at_claims"]
    power, wanted = at_claims["pass"], found["min_power"]
    signable = power >= wanted
    reason = (
        f"the gate passes {power:.1%} (+-{at_claims['half_width_95']['pass']:.1%}) with every "
        f"clause at its claimed effect at {found['noise']['source']}; the spec wants {wanted:.0%}"
    )
    proposals = (
        []
        if signable
        else proposals_for(spec, found["noise"]["sd_log_ratio"], hours_per_repetition, wanted)
    )
    return {
        "signable": signable,
        "power": power,
        "min_power": wanted,
        "reason": reason,
        "proposals": proposals,
    }


def proposals_for(
    spec: G3Spec, sd: float, hours: float | None, wanted: float = DEFAULT_MIN_POWER
) -> list[Proposal]:
    parsed = log_ratio_terms(parse_g3_spec(spec))
    scan = _claims_scan(parsed, sd)
    found = [
        _more_repetitions(parsed, sd, hours, wanted),
        _more_prompts(spec, parsed, sd, hours, wanted),
        _fewer_cells(parsed, scan, hours, wanted),
        _bars_the_data_shows(parsed, scan, hours, wanted),
    ]
    return [proposal for proposal in found if proposal is not None]


@dataclass(frozen=True)
class ClaimsScan:
    """One sizing draw of the spec as it stands, every cell at its claim: the walks the cell
    and bar proposals re-read (a walk costs a fraction of a draw)."""

    draw: GateDraw
    plan: SequentialPlan
    margins: np.ndarray
    floors: np.ndarray

    def power(self, margins: np.ndarray | None = None) -> float:
        shifted = self.margins if margins is None else margins
        outcome = self.draw.walk(shifted, self.plan, self.floors)
        return float(gate_outcome(outcome, self.plan).passed.mean())


def _claims_scan(parsed: G3Terms, sd: float, seed: int = 17) -> ClaimsScan:
    plan = gate_plan(parsed, parsed.max_repetitions, DESIGN_PATHS)
    draw = draw_gate(parsed, plan, sd, SCAN_GATES, np.random.default_rng(seed))
    return ClaimsScan(draw, plan, claimed_margins(parsed), cell_floors(parsed, None))


def _hours_at(parsed: G3Terms, hours: float | None, factor: float = 1.0) -> float | None:
    """Host hours of an attempt run to repetitions.max, each repetition `factor` as long."""
    return None if hours is None else parsed.max_repetitions * hours * factor


def power_at(parsed: G3Terms, sd: float, max_repetitions: int, seed: int = 17) -> float:
    """Gate power at the claims with `max_repetitions` (sizing boundaries, SCAN_GATES gates)."""
    plan = gate_plan(parsed, max_repetitions, DESIGN_PATHS)
    draw = draw_gate(parsed, plan, sd, SCAN_GATES, np.random.default_rng(seed))
    outcome = draw.walk(claimed_margins(parsed), plan, cell_floors(parsed, None))
    return float(gate_outcome(outcome, plan).passed.mean())


def repetitions_for_power(parsed: G3Terms, sd: float, wanted: float) -> int | None:
    """The smallest even repetitions.max (up to the schema's cap) whose gate power at the claims
    reaches `wanted` at this noise; None when even the cap does not."""
    low = parsed.min_repetitions
    if power_at(parsed, sd, MAX_REPETITIONS) < wanted:
        return None
    high = MAX_REPETITIONS
    while high - low > 2:
        middle = low + 2 * ((high - low) // 4 or 1)
        if power_at(parsed, sd, middle) >= wanted:
            high = middle
        else:
            low = middle
    return high if power_at(parsed, sd, low) < wanted else low


def _more_repetitions(
    parsed: G3Terms, sd: float, hours: float | None, wanted: float
) -> Proposal | None:
    needed = repetitions_for_power(parsed, sd, wanted)
    if needed is None:
        return None
    cost = None if hours is None else needed * hours
    return {
        "kind": "repetitions",
        "text": f"repetitions.max {needed} (now {parsed.max_repetitions})",
        "value": float(needed),
        "host_hours": cost,
    }


def _more_prompts(
    spec: G3Spec, parsed: G3Terms, sd: float, hours: float | None, wanted: float
) -> Proposal | None:
    """The noise at which the current plan reaches `wanted`, as more prompts per bench: a p50
    over k times the requests has about 1/sqrt(k) of the noise (sampling noise dominating),
    and each bench runs about k times as long (priced so, the servers' start-up included, which
    overstates it a little)."""
    low, high = 0.05, 1.0
    if power_at(parsed, sd * low, parsed.max_repetitions) < wanted:
        return None
    for _ in range(8):
        middle = (low + high) / 2
        if power_at(parsed, sd * middle, parsed.max_repetitions) >= wanted:
            low = middle
        else:
            high = middle
    factor = math.ceil(1 / (low * low) * 10) / 10
    prompts = math.ceil(spec["workload"]["num_prompts"] * factor)
    return {
        "kind": "prompts",
        "text": f"workload.num_prompts {prompts} (noise x{low:.2f}, if request sampling "
        "dominates it; each bench then runs about that much longer)",
        "value": float(prompts),
        "host_hours": _hours_at(parsed, hours, factor),
    }


def _fewer_cells(
    parsed: G3Terms, scan: ClaimsScan, hours: float | None, wanted: float
) -> Proposal | None:
    """Drop the cells least likely to pass at their claims, one at a time, until the gate
    reaches `wanted` (each remaining cell keeps its bar; the fail side's family shrinks with
    it). None when it takes every cell but one and still falls short, or drops nothing."""
    cells = cells_of(parsed)
    outcome = scan.draw.walk(scan.margins, scan.plan, scan.floors)
    by_weakness = list(np.argsort((outcome.verdict == PASS).mean(axis=0), kind="stable"))
    kept = list(range(len(cells)))
    for weakest in by_weakness[:-1]:
        kept.remove(weakest)
        members = np.array(sorted(kept))
        reduced = _with_cells(parsed, [cells[i] for i in members])
        plan = gate_plan(reduced, parsed.max_repetitions, DESIGN_PATHS)
        subset = scan.draw.subset(members)
        walked = subset.walk(scan.margins[members], plan, scan.floors[members])
        if gate_outcome(walked, plan).passed.mean() >= wanted:
            dropped = [cells[i] for i in sorted(set(range(len(cells))) - set(kept))]
            tiers_left = {tier for clause in reduced.clauses for tier in clause.tiers}
            share = len(tiers_left) / len(parsed.tiers)
            return {
                "kind": "cells",
                "text": "drop "
                + ", ".join(f"{c.metric} {c.compare} at c={tier}" for c, tier in dropped)
                + f" (keeps {len(kept)} of {len(cells)} cells, each at its bar)",
                "value": float(len(kept)),
                "host_hours": _hours_at(parsed, hours, share),
            }
    return None


def _with_cells(parsed: G3Terms, cells: list[tuple[Clause, int]]) -> G3Terms:
    tiers = {(clause.index, tier) for clause, tier in cells}
    clauses = [
        replace(clause, tiers=kept)
        for clause in parsed.clauses
        if (kept := tuple(t for t in clause.tiers if (clause.index, t) in tiers))
    ]
    return replace(parsed, clauses=tuple(clauses))


BAR_SHIFT_LIMIT = 2.0  # log units: a bar e^2 = 7.4x further from the claim proves nothing


def _bars_the_data_shows(
    parsed: G3Terms, scan: ClaimsScan, hours: float | None, wanted: float
) -> Proposal | None:
    """The bars this plan demonstrates at its noise: every bar moved the same (log) distance
    away from its claim, as little as reaches `wanted` with every clause at its claim."""
    if scan.power(scan.margins + BAR_SHIFT_LIMIT) < wanted:
        return None
    low, high = 0.0, BAR_SHIFT_LIMIT
    for _ in range(12):  # to 0.0005 in log: well under a percent of any bar
        middle = (low + high) / 2
        if scan.power(scan.margins + middle) >= wanted:
            high = middle
        else:
            low = middle
    bars = [
        f"{clause.metric} {clause.compare} at c={'/'.join(map(str, clause.tiers))} {clause.change} "
        f"{_bar_words(clause, effect_at_margin(clause, -high))} (now "
        f"{_bar_words(clause, clause.threshold)})"
        for clause in parsed.clauses
    ]
    return {
        "kind": "bars",
        "text": "bars the data can show at this cost: " + "; ".join(bars),
        "value": high,
        "host_hours": _hours_at(parsed, hours),
    }


def _bar_words(clause: Clause, value: float) -> str:
    return f"{value:.3g}x" if clause.change == "ratio" else f"{value:.3g} %"


def stated_sd(spec: G3Spec) -> float | None:
    cv = (spec.get("statistics") or {}).get("noise_cv_pct")
    return None if cv is None else sd_from_cv(cv)
