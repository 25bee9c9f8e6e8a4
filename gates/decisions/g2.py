"""G2 functional integration: server health, greedy-output equivalence, offload hit rate and the
A/A noise floor; with a replayed trace, its external hit rate against the planner's band (a
warning, never the verdict). Pure: a typed spec, plain observations and the band in, a typed
decision out; imports no Django and does no I/O.
"""

from __future__ import annotations

import math
from typing import Any, Unpack

import numpy as np

from documents.cell import BandContext, RowVerdict
from documents.decision import (
    AAPair,
    EquivalenceObserved,
    G2Check,
    G2Decision,
    G2Limits,
    G2Numbers,
    G2Observed,
    HealthObserved,
)
from documents.spec import G2Spec
from gates.decisions.cells.bands import judge_band, parse_band
from gates.decisions.numbers import finite_float, is_number, metric_value
from gates.decisions.statistics.inference import t_interval
from gates.decisions.validity import EvidenceError, read_count

# The G2 spec has no confidence field; the A/A interval uses this unless noise_floor gives one.
DEFAULT_NOISE_CONFIDENCE = 0.90

# Each check's measured number and the bar it is held to, by their keys in the check's row: what
# a reader tracks across attempts (gates.history draws them).
CHECK_NUMBERS: dict[str, tuple[str, str]] = {
    "health": ("seconds", "timeout_s"),
    "equivalence": ("mismatch_pct", "max_mismatch_pct"),
    "offload_hit": ("external_hit_rate", "min_external_hit_rate"),
    "noise_floor": ("noise_pct", "max_noise_pct"),
    "replay_band": ("external_hit_rate", "band_low"),
}


def decide_g2(spec: G2Spec, observed: Any, context: Any = None) -> G2Decision:
    """The G2 verdict: invalid if an A/A run broke validity, fail if any check fails,
    pass if all pass, inconclusive otherwise (something was not observed). A replayed hit
    cell's band (context `replay_external_band`) adds a row that never decides the verdict:
    below the band it is a warning in the notes and the reasons."""
    limits, prompts = _limits(spec), len(spec["equivalence"]["prompts"])
    seen = _parse_observed(observed)
    band = _parse_band(context)
    rows = [
        _health_row(limits["timeout_s"], seen["health"]),
        _equivalence_row(prompts, limits["max_mismatch_pct"], seen["equivalence"]),
        _hit_row(limits["min_external_hit_rate"], seen["external_hit_rate"]),
        _noise_row(limits, seen["aa_pairs"]),
    ]
    verdict = _combine([row["verdict"] for row in rows])
    reasons = [f"{row['check']}: {row['cause']}" for row in rows if row["verdict"] == verdict]
    decision: G2Decision = {
        "gate": "G2",
        "spec_version": spec.get("version"),
        "verdict": verdict,
        "reasons": reasons,
        "clauses": rows,
        "validity": [],
        "inputs": {"limits": limits, "prompt_count": prompts, "observed": seen},
    }
    if band is not None:  # only then: decisions without a replayed band stay as they were
        row = band_row(band, seen["external_hit_rate"])
        rows.append(row)
        warning = f"{row['check']}: {row['cause']}"
        decision["notes"] = [warning] if row.get("position") in ("below", "above") else []
        reasons += [warning] if row.get("position") == "below" else []
        decision["inputs"]["context"] = {"replay_external_band": band}
    return decision


def _combine(verdicts: list[RowVerdict]) -> RowVerdict:
    worst: tuple[RowVerdict, ...] = ("invalid", "fail", "inconclusive")
    for verdict in worst:
        if verdict in verdicts:
            return verdict
    return "pass"


def _row(check: str, verdict: RowVerdict, cause: str, **numbers: Unpack[G2Numbers]) -> G2Check:
    return {"check": check, "verdict": verdict, "cause": cause, **numbers}


def _health_row(timeout_s: float, health: HealthObserved | None) -> G2Check:
    if health is None or health.get("healthy") is None:
        return _row("health", "inconclusive", "server health was not observed", timeout_s=timeout_s)
    seconds = health.get("seconds")
    if not health["healthy"]:
        return _row(
            "health",
            "fail",
            f"the offload server did not become healthy within {timeout_s:g} s",
            timeout_s=timeout_s,
            seconds=seconds,
        )
    if seconds is not None and seconds > timeout_s:
        return _row(
            "health",
            "fail",
            f"healthy only after {seconds:g} s (limit {timeout_s:g} s)",
            timeout_s=timeout_s,
            seconds=seconds,
        )
    return _row(
        "health", "pass", "the offload server became healthy", timeout_s=timeout_s, seconds=seconds
    )


def _equivalence_row(
    total: int, limit: float, results: list[EquivalenceObserved] | None
) -> G2Check:
    results = results or []
    if any(not 0 <= item["prompt"] < total for item in results):
        raise EvidenceError("observed.equivalence", f"a prompt index is outside 0..{total - 1}")
    compared = [
        item for item in results if item["reference"] is not None and item["offload"] is not None
    ]
    mismatched = sorted(item["prompt"] for item in compared if item["reference"] != item["offload"])
    # Share of all spec prompts: unobserved prompts cannot lower it, so a fail is already final.
    share = 100 * len(mismatched) / total
    numbers: G2Numbers = {
        "prompts": total,
        "compared": len(compared),
        "mismatched": mismatched,
        "mismatch_pct": share,
        "max_mismatch_pct": limit,
    }
    if share > limit:
        return _row(
            "equivalence",
            "fail",
            f"{len(mismatched)} of {total} greedy outputs differ "
            f"with offload ({share:.1f} % > {limit:g} %)",
            **numbers,
        )
    if len(compared) < total:
        return _row(
            "equivalence",
            "inconclusive",
            f"only {len(compared)} of {total} prompts were compared",
            **numbers,
        )
    return _row(
        "equivalence",
        "pass",
        f"{len(mismatched)} of {total} outputs differ ({share:.1f} % <= {limit:g} %)",
        **numbers,
    )


def _hit_row(floor: float, rate: float | None) -> G2Check:
    if rate is None:
        return _row(
            "offload_hit",
            "inconclusive",
            "external hit rate was not observed",
            min_external_hit_rate=floor,
            external_hit_rate=None,
        )
    verdict: RowVerdict = "pass" if rate >= floor else "fail"
    return _row(
        "offload_hit",
        verdict,
        f"external hit rate {rate:.3f} (floor {floor:g})",
        min_external_hit_rate=floor,
        external_hit_rate=rate,
    )


def band_row(band: BandContext, rate: float | None) -> G2Check:
    """Where the hit cell's external hit rate (hits over what the GPU cache missed) falls
    against the planner's band (gates.decisions.cells.bands, shared with G3's offload cells).
    Advisory, never in the gate's verdict: within or above is `pass`, below or untold
    `inconclusive`."""
    verdict, cause, numbers = judge_band(band, rate, BAND_WORDS)
    return _row("replay_band", verdict, cause, **numbers)


BAND_WORDS: dict[str, str] = {
    "within": "",
    "below": ": a warning to both parties before G3, not a G2 failure (the band is the planner's "
    "prediction from the trace and the KV plan, not an agreed bar)",
    "above": ": a model error in the tier's favour (eviction policy, block size, replicas)",
}


def _parse_band(context: Any) -> BandContext | None:
    """The context's `replay_external_band`: {tier, band: [low, high]} or {tier, missing}."""
    band = context.get("replay_external_band") if isinstance(context, dict) else None
    return None if band is None else parse_band(band, "context.replay_external_band")


def _noise_row(limits: G2Limits, pairs: list[dict[str, Any]] | None) -> G2Check:
    logs, used, invalid = _aa_log_ratios(limits["metric"], pairs or [])
    numbers: G2Numbers = {
        "metric": limits["metric"],
        "repetitions": limits["repetitions"],
        "pairs": used,
        "confidence": limits["confidence"],
        "max_noise_pct": limits["max_noise_pct"],
    }
    if invalid:
        return _row("noise_floor", "invalid", "; ".join(invalid), **numbers)
    if len(logs) < 2:
        cause = f"{len(logs)} usable A/A pair(s); need 2"
        return _row("noise_floor", "inconclusive", cause, **numbers)
    numbers.update(_aa_interval(logs, limits["confidence"]))
    if len(logs) < limits["repetitions"]:
        cause = f"{len(logs)} of {limits['repetitions']} A/A repetitions usable"
        return _row("noise_floor", "inconclusive", cause, **numbers)
    problems = _noise_problems(numbers, limits["max_noise_pct"])
    if problems:
        return _row("noise_floor", "fail", "; ".join(problems), **numbers)
    cause = (
        f"A/A interval [{numbers['low_ratio']:.4f}, {numbers['high_ratio']:.4f}] lies within "
        f"±{numbers['max_noise_pct']:g} %"
    )
    return _row("noise_floor", "pass", cause, **numbers)


def _aa_interval(logs: list[float], confidence: float) -> G2Numbers:
    """The A/A t interval of the log-ratios; the noise floor is its half-width in percent."""
    mean, sd, low, high = (float(v) for v in t_interval(np.array(logs), 1 - confidence))
    return {
        "mean_log_ratio": mean,
        "sd_log_ratio": sd,
        "low_ratio": _bounded_exp(low),
        "high_ratio": _bounded_exp(high),
        "noise_pct": (_bounded_exp(high - mean) - 1) * 100,
    }


def _bounded_exp(value: float) -> float:
    # Absurd log-ratios would overflow exp(); cap them so the result stays finite JSON.
    return math.exp(max(min(value, 700.0), -700.0))


def _noise_problems(numbers: G2Numbers, limit: float) -> list[str]:
    """The A/A interval must lie inside ±max_noise_pct: noise and bias together stay below the
    floor. A tiny but consistent bias (a 1 % difference measured very precisely) is harmless;
    the same bias measured with a wide interval is not."""
    problems = []
    if numbers["noise_pct"] > limit:
        problems.append(f"A/A half-width {numbers['noise_pct']:.2f} % exceeds {limit:g} %")
    bound = 1 + limit / 100
    if not (1 / bound <= numbers["low_ratio"] and numbers["high_ratio"] <= bound):
        problems.append(
            f"A/A interval [{numbers['low_ratio']:.4f}, {numbers['high_ratio']:.4f}] reaches "
            f"beyond ±{limit:g} %: two identical arms differ by more than the floor"
        )
    return problems


def _aa_log_ratios(
    metric: str, pairs: list[dict[str, Any]]
) -> tuple[list[float], list[AAPair], list[str]]:
    logs: list[float] = []
    used: list[AAPair] = []
    invalid: list[str] = []
    for i, pair in enumerate(pairs):
        values: list[float | None] = []
        for side in ("a", "b"):
            completed = read_count(pair[side], "completed", f"observed.aa_pairs[{i}].{side}")
            if completed == 0:
                invalid.append(f"A/A pair {i} side {side}: no completed requests")
            values.append(
                _positive(metric_value(pair[side], metric), f"observed.aa_pairs[{i}].{side}")
            )
        a, b = values
        if a is not None and b is not None:
            logs.append(math.log(a) - math.log(b))
            used.append(
                {"repetition": pair.get("repetition"), "a": a, "b": b, "log_ratio": logs[-1]}
            )
    return logs, used, invalid


def _positive(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if not is_number(value):
        raise EvidenceError(field, "the noise metric must be a number")
    number = finite_float(value)
    return number if number is not None and number > 0 else None


def _limits(spec: G2Spec) -> G2Limits:
    noise = spec["noise_floor"]
    return {
        "timeout_s": float(spec["health"]["timeout_s"]),
        "max_mismatch_pct": float(spec["equivalence"]["max_mismatch_pct"]),
        "min_external_hit_rate": float(spec["offload_hit"]["min_external_hit_rate"]),
        "metric": noise["metric"],
        "repetitions": noise["repetitions"],
        "max_noise_pct": float(noise["max_noise_pct"]),
        "confidence": float(noise.get("confidence", DEFAULT_NOISE_CONFIDENCE)),
    }


def _parse_observed(observed: Any) -> G2Observed:
    if not isinstance(observed, dict):
        raise EvidenceError("observed", "must be an object")
    return {
        "health": _parse_health(observed.get("health")),
        "equivalence": _parse_equivalence(observed.get("equivalence")),
        "external_hit_rate": _parse_rate(observed.get("external_hit_rate")),
        "aa_pairs": _parse_pairs(observed.get("aa_pairs")),
    }


def _parse_health(health: Any) -> HealthObserved | None:
    if health is None:
        return None
    if not isinstance(health, dict) or health.get("healthy") not in (True, False, None):
        raise EvidenceError("observed.health", "must be {healthy: bool, seconds: number|null}")
    seconds = health.get("seconds")
    if seconds is not None and finite_float(seconds) is None:
        raise EvidenceError("observed.health.seconds", "must be a finite number or null")
    return {"healthy": health.get("healthy"), "seconds": seconds}


def _parse_equivalence(results: Any) -> list[EquivalenceObserved] | None:
    if results is None:
        return None
    if not isinstance(results, list):
        raise EvidenceError("observed.equivalence", "must be a list")
    seen: dict[int, EquivalenceObserved] = {}
    for i, item in enumerate(results):
        field = f"observed.equivalence[{i}]"
        prompt = item.get("prompt") if isinstance(item, dict) else None
        if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt in seen:
            raise EvidenceError(f"{field}.prompt", "must be a distinct prompt index")
        for side in ("reference", "offload"):
            if item.get(side) is not None and not isinstance(item[side], str):
                raise EvidenceError(f"{field}.{side}", "must be the generated text or null")
        seen[prompt] = {
            "prompt": prompt,
            "reference": item.get("reference"),
            "offload": item.get("offload"),
        }
    return list(seen.values())


def _parse_rate(rate: Any) -> float | None:
    if rate is None:
        return None
    if not is_number(rate):
        raise EvidenceError("observed.external_hit_rate", "must be a number or null")
    return finite_float(rate)


def _parse_pairs(pairs: Any) -> list[dict[str, Any]] | None:
    if pairs is None:
        return None
    if not isinstance(pairs, list):
        raise EvidenceError("observed.aa_pairs", "must be a list")
    for i, pair in enumerate(pairs):
        if not isinstance(pair, dict) or not all(isinstance(pair.get(s), dict) for s in ("a", "b")):
            raise EvidenceError(
                f"observed.aa_pairs[{i}]", "must be {repetition, a: metrics, b: metrics}"
            )
    return pairs
