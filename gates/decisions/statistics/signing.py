"""Power before signing: whether a G3 spec may be signed at a noise (its gate passes at least
`min_power` of the time with every clause at its claimed effect), and, when it may not, what
would make it decisive and what that costs in host hours: more repetitions, more prompts per
bench (a p50 over more requests is less noisy), fewer clauses, or the bar the data could show.
The services refuse a signature below `min_power` unless both parties sign an acknowledgement.
Pure: a typed spec in, a typed document out; imports no Django.
"""

from __future__ import annotations

import math

import numpy as np

from documents.characteristic import Proposal, SigningCheck
from documents.spec import G3Spec
from gates.decisions.clauses import G3Terms, log_ratio_terms, parse_g3_spec
from gates.decisions.statistics.inference import DESIGN_PATHS
from gates.decisions.statistics.operating import (
    DEFAULT_MIN_POWER,
    cell_floors,
    claimed_margins,
    gate_plan,
    operating_characteristic,
)
from gates.decisions.statistics.simulation import draw_gate, gate_outcome
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
    found = [_more_repetitions(parsed, sd, hours, wanted), _more_prompts(spec, parsed, sd, wanted)]
    return [proposal for proposal in found if proposal is not None]


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


def _more_prompts(spec: G3Spec, parsed: G3Terms, sd: float, wanted: float) -> Proposal | None:
    """The noise at which the current plan reaches `wanted`, as more prompts per bench: a p50
    over k times the requests has about 1/sqrt(k) of the noise (sampling noise dominating)."""
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
        "host_hours": None,
    }


def stated_sd(spec: G3Spec) -> float | None:
    cv = (spec.get("statistics") or {}).get("noise_cv_pct")
    return None if cv is None else sd_from_cv(cv)
