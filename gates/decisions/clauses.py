"""G3 clauses and the parts of a G3 spec the decision engine reads, parsed into plain dataclasses.

Pure: plain data in, dataclasses out. Imports no Django and does no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ARM_KINDS = frozenset({"resident", "offload", "recompute"})
CHANGE_KINDS = frozenset({"reduction", "gain", "ratio"})

# name -> (key in the normalized metrics dict, percentile key or None, which way is better)
_LATENCY_STATS = {"p50": "median", "p90": "p90", "p99": "p99", "mean": "mean"}
METRICS: dict[str, tuple[str, str | None, str]] = {
    f"{family}_{stat}": (f"{family}_ms", key, "lower")
    for family in ("ttft", "tpot", "itl", "e2el")
    for stat, key in _LATENCY_STATS.items()
}
METRICS.update(
    {
        name: (name, None, "higher")
        for name in ("output_throughput", "request_throughput", "total_token_throughput")
    }
)
KNOWN_METRICS = frozenset(METRICS)


class SpecFieldError(ValueError):
    """A spec value the decision engine cannot use; `field` names it like `clauses[2].tiers`."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class ClauseError(SpecFieldError):
    """A G3 clause (or the part of the spec it depends on) that cannot be decided."""


@dataclass(frozen=True)
class Clause:
    """One clause: metric(a)/metric(b) must change by at least `threshold` at each tier."""

    index: int
    metric: str
    a: str
    b: str
    change: str
    threshold: float
    tiers: tuple[int, ...]

    @property
    def compare(self) -> str:
        return f"{self.a}/{self.b}"

    @property
    def bound_ratio(self) -> float:
        """The threshold as a ratio A/B: at most this for reductions, at least it otherwise."""
        return change_to_ratio(self.change, self.threshold)

    @property
    def better(self) -> str:
        return METRICS[self.metric][2]


@dataclass(frozen=True)
class ValidityLimits:
    max_failed_pct: float
    min_external_hit_rate: float | None
    require_kv_exceeds_vram: bool


@dataclass(frozen=True)
class G3Spec:
    version: int | None
    arms: dict[str, str]
    tiers: tuple[int, ...]
    min_repetitions: int
    max_repetitions: int
    confidence: float
    clauses: tuple[Clause, ...]
    validity: ValidityLimits


def metric_value(metrics: dict, name: str) -> Any:
    """The raw value of a clause metric in one normalized run (None when the source lacks it)."""
    key, stat, _ = METRICS[name]
    value = metrics.get(key)
    if stat is None:
        return value
    return value.get(stat) if isinstance(value, dict) else None


def parse_clauses(spec: Any) -> list[Clause]:
    """The clauses of a G3 spec, checked against its arms and tiers; raises ClauseError."""
    document = _require_dict(spec, "(document)")
    arms = _parse_arms(document.get("arms"))
    tiers = _parse_tiers(document.get("tiers"))
    raw = document.get("clauses")
    if not isinstance(raw, list) or not raw:
        raise ClauseError("clauses", "must be a non-empty list")
    return [_parse_clause(item, i, arms, tiers) for i, item in enumerate(raw)]


def parse_g3_spec(spec: Any) -> G3Spec:
    """Everything decide_g3 reads from a G3 spec; raises ClauseError naming the bad field."""
    document = _require_dict(spec, "(document)")
    clauses = tuple(parse_clauses(document))
    low, high = _parse_repetitions(document.get("repetitions"))
    version = document.get("version")
    return G3Spec(
        version=version if isinstance(version, int) else None,
        arms=_parse_arms(document["arms"]),
        tiers=_parse_tiers(document["tiers"]),
        min_repetitions=low,
        max_repetitions=high,
        confidence=parse_confidence(document.get("confidence"), "confidence"),
        clauses=clauses,
        validity=_parse_validity(document.get("validity")),
    )


def parse_confidence(value: Any, field: str) -> float:
    if not _is_number(value) or not 0.5 < value < 1:
        raise ClauseError(field, "must be a number between 0.5 and 1 (exclusive)")
    return float(value)


def _parse_clause(item: Any, i: int, arms: dict[str, str], tiers: tuple[int, ...]) -> Clause:
    where = f"clauses[{i}]"
    clause = _require_dict(item, where)
    unknown = sorted(
        {str(key) for key in clause}
        - {"metric", "compare", "change", "at_least_pct", "at_least", "tiers"}
    )
    if unknown:  # a misspelt key would otherwise silently drop part of a signed contract
        raise ClauseError(f"{where}.{unknown[0]}", "is not a known clause field")
    metric = clause.get("metric")
    if not isinstance(metric, str) or metric not in KNOWN_METRICS:
        known = ", ".join(sorted(KNOWN_METRICS))
        raise ClauseError(f"{where}.metric", f"unknown metric {metric!r}; known: {known}")
    a, b = _parse_compare(clause.get("compare"), arms, f"{where}.compare")
    change = clause.get("change")
    if not isinstance(change, str) or change not in CHANGE_KINDS:
        raise ClauseError(f"{where}.change", f"must be one of {sorted(CHANGE_KINDS)}")
    threshold = _parse_threshold(clause, change, where)
    chosen = _parse_clause_tiers(clause.get("tiers"), tiers, f"{where}.tiers")
    return Clause(i, metric, a, b, change, threshold, chosen)


def _parse_compare(value: Any, arms: dict[str, str], field: str) -> tuple[str, str]:
    if not isinstance(value, str) or value.count("/") != 1:
        raise ClauseError(field, "must be 'A/B' naming two arms, e.g. 'offload/baseline'")
    a, b = value.split("/")
    for role in (a, b):
        if role not in arms:
            raise ClauseError(field, f"unknown arm {role!r}; the spec's arms are {sorted(arms)}")
    if a == b:
        raise ClauseError(field, "compares an arm with itself")
    return a, b


def _parse_threshold(clause: dict, change: str, where: str) -> float:
    key, other = ("at_least", "at_least_pct") if change == "ratio" else ("at_least_pct", "at_least")
    if other in clause:
        raise ClauseError(f"{where}.{other}", f"does not apply to change {change!r}; use {key}")
    value = finite_float(clause.get(key))
    if value is None:
        raise ClauseError(f"{where}.{key}", "is required and must be a finite number")
    if value <= 0:
        raise ClauseError(f"{where}.{key}", f"must be positive for change {change!r}")
    if change == "reduction" and value >= 100:
        raise ClauseError(f"{where}.{key}", "a reduction must be below 100 %")
    return float(value)


def _parse_clause_tiers(value: Any, tiers: tuple[int, ...], field: str) -> tuple[int, ...]:
    if value == "all":
        return tiers
    if not isinstance(value, list) or not value:
        raise ClauseError(field, "must be 'all' or a non-empty list of tiers")
    for tier in value:
        if not isinstance(tier, int) or isinstance(tier, bool) or tier not in tiers:
            raise ClauseError(field, f"tier {tier!r} is not one of the spec's tiers {list(tiers)}")
    if len(set(value)) != len(value):
        raise ClauseError(field, "lists a tier twice")
    return tuple(value)


def _parse_arms(value: Any) -> dict[str, str]:
    arms = _require_dict(value, "arms")
    if len(arms) < 2:
        raise ClauseError("arms", "needs at least two arms")
    for role, kind in arms.items():
        if not isinstance(kind, str) or kind not in ARM_KINDS:
            raise ClauseError(f"arms.{role}", f"unknown arm kind {kind!r}; use {sorted(ARM_KINDS)}")
    return dict(arms)


def _parse_tiers(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ClauseError("tiers", "must be a non-empty list of concurrency tiers")
    for tier in value:
        if not isinstance(tier, int) or isinstance(tier, bool) or tier < 1:
            raise ClauseError("tiers", f"tier {tier!r} is not a positive integer")
    if len(set(value)) != len(value):
        raise ClauseError("tiers", "lists a tier twice")
    return tuple(value)


def _parse_repetitions(value: Any) -> tuple[int, int]:
    repetitions = _require_dict(value, "repetitions")
    low, high = repetitions.get("min"), repetitions.get("max")
    for name, number in (("min", low), ("max", high)):
        if not isinstance(number, int) or isinstance(number, bool) or not 2 <= number <= 1000:
            raise ClauseError(f"repetitions.{name}", "must be an integer from 2 to 1000")
    if low > high:
        raise ClauseError("repetitions.min", "must not exceed repetitions.max")
    return low, high


def _parse_validity(value: Any) -> ValidityLimits:
    validity = _require_dict(value, "validity")
    failed = validity.get("max_failed_pct")
    if not _is_number(failed) or not 0 <= failed <= 100:
        raise ClauseError("validity.max_failed_pct", "must be a number from 0 to 100")
    hit = validity.get("min_external_hit_rate")
    if hit is not None and (not _is_number(hit) or not 0 <= hit <= 1):
        raise ClauseError("validity.min_external_hit_rate", "must be null or from 0 to 1")
    require = validity.get("require_kv_exceeds_vram")
    if not isinstance(require, bool):
        raise ClauseError("validity.require_kv_exceeds_vram", "must be true or false")
    return ValidityLimits(float(failed), None if hit is None else float(hit), require)


def _require_dict(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise ClauseError(field, "must be a JSON object")
    return value


def finite_float(value: Any) -> float | None:
    """`value` as a float when it is a finite real number (never a bool), otherwise None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return number if math.isfinite(number) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def change_to_ratio(change: str, value: float) -> float:
    """A change in clause units (reduction %, gain %, ratio x) as the ratio A/B."""
    if change == "reduction":
        return 1 - value / 100
    if change == "gain":
        return 1 + value / 100
    return value


def ratio_to_change(change: str, ratio: float) -> float:
    """The ratio A/B in clause units; the inverse of change_to_ratio."""
    if change == "reduction":
        return (1 - ratio) * 100
    if change == "gain":
        return (ratio - 1) * 100
    return ratio
