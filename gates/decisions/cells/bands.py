"""A replayed trace's achieved external hit rate (the offload tier's hits over what the GPU
cache missed) against the planner's band for its concurrency tier: within, below or above.
Shared by G2 (its hit cell) and G3 (each offload-arm cell). Advisory, never a verdict: the
band is a model's prediction (LRU with prefix semantics over the trace's blocks, one replica,
the planner's capacity), not a bar either party signed. Pure: the band and the rate in, the
row's cause and numbers out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from documents.cell import BandContext, BandNumbers, BandPosition, G3BandRow, RowVerdict
from gates.decisions.numbers import finite_float, is_number
from gates.decisions.validity import EvidenceError, Measurement, offload_hit_rate

# What each side of the band means, after the row's numbers.
MODEL_ERROR = {
    "within": "",
    "below": ": a model error, not a tier defect (the band is the planner's prediction from the "
    "trace and the KV plan, not an agreed bar); never the G3 verdict",
    "above": ": a model error in the tier's favour (eviction policy, block size, replicas)",
}


def judge_band(
    band: BandContext, rate: float | None, words: dict[str, str], what: str = "external hit rate"
) -> tuple[RowVerdict, str, BandNumbers]:
    """The row's verdict (within or above: `pass`; below, no band or no rate: `inconclusive`,
    which the gate's verdict never reads), its cause and numbers. `words` says what each side
    means to this gate (MODEL_ERROR for G3)."""
    tier = band["tier"]
    if "missing" in band:
        cause = f"no band from the planner at c={tier}: {band['missing']}"
        return "inconclusive", cause, {"advisory": True, "band_tier": tier}
    low, high = band["band"]
    numbers: BandNumbers = {"advisory": True, "band_tier": tier, "band_low": low, "band_high": high}
    numbers["expected"], numbers["external_hit_rate"] = f"{low:.1%} to {high:.1%}", rate
    if rate is None:
        return "inconclusive", f"{what} was not observed", numbers
    position: BandPosition = "below" if rate < low else "above" if rate > high else "within"
    numbers["position"], numbers["observed"] = position, f"{rate:.1%} ({position})"
    cause = (
        f"{what} {rate:.1%} (offload-tier hits over the tokens the GPU cache missed) "
        f"is {position} the planner's band {low:.1%} to {high:.1%} at c={tier}"
    ) + words[position]
    return ("inconclusive" if position == "below" else "pass"), cause, numbers


def parse_band(band: Any, field: str) -> BandContext:
    """One tier's band as the context carries it: {tier, band: [low, high]} or {tier, missing}."""
    tier = band.get("tier") if isinstance(band, dict) else None
    if not isinstance(tier, int) or isinstance(tier, bool):
        raise EvidenceError(f"{field}.tier", "must be the replayed cell's concurrency tier")
    if isinstance(band.get("missing"), str):
        return {"tier": tier, "missing": band["missing"]}
    ends = band.get("band")
    ok = isinstance(ends, list) and len(ends) == 2 and all(map(is_number, ends))
    low, high = (finite_float(end) for end in ends) if ok else (None, None)
    if low is None or high is None or not 0 <= low <= high <= 1:
        raise EvidenceError(f"{field}.band", "must be [low, high], 0 <= low <= high <= 1")
    return {"tier": tier, "band": [low, high]}


def parse_g3_bands(context: Any) -> list[BandContext] | None:
    """The G3 context's `replay_external_bands` (one per tier), None when it has none."""
    bands = context.get("replay_external_bands") if isinstance(context, dict) else None
    if bands is None:
        return None
    field = "context.replay_external_bands"
    if not isinstance(bands, list):
        raise EvidenceError(field, "must be a list of {tier, band} or {tier, missing}")
    parsed = [parse_band(band, f"{field}[{i}]") for i, band in enumerate(bands)]
    if len({band["tier"] for band in parsed}) != len(parsed):
        raise EvidenceError(field, "names a tier twice")
    return parsed


def g3_band_rows(
    bands: Sequence[BandContext], arms: dict[str, str], items: Sequence[Measurement]
) -> tuple[list[G3BandRow], list[str]]:
    """One row per offload-arm cell (arm x tier with a band in the context): the mean of its
    kept repetitions' offload hit rates against the band; and a note per cell outside it."""
    rates: dict[tuple[str, int], list[tuple[int, float | None, str]]] = defaultdict(list)
    for item in items:
        if item.kind == "offload":
            rate, what = offload_hit_rate(item)
            rates[(item.arm, item.tier)].append((item.repetition, rate, what))
    rows, notes = [], []
    for band in sorted(bands, key=lambda band: band["tier"]):
        for arm in sorted(role for role, kind in arms.items() if kind == "offload"):
            seen = sorted(rates.get((arm, band["tier"]), []), key=lambda found: found[0])
            known = [rate for _, rate, _ in seen if rate is not None]
            what = seen[0][2] if seen else "external hit rate"
            mean = sum(known) / len(known) if known else None
            verdict, cause, numbers = judge_band(band, mean, MODEL_ERROR, f"mean {what}")
            row: G3BandRow = {
                "check": "replay_band",
                "arm": arm,
                "tier": band["tier"],
                "verdict": verdict,
                "cause": cause,
                "rates": known,
                "hit_proof": what,
                **numbers,
            }
            rows.append(row)
            if numbers.get("position") in ("below", "above"):
                notes.append(f"replay_band {arm} c={band['tier']}: {cause}")
    return rows, notes
