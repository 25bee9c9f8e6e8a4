"""G3 clauses and the terms of a G3 spec the decision engine reads, as plain dataclasses.

The spec was accepted by gates.specs.validation.parse_spec (which owns its rules and
vocabulary); this module reads it and checks nothing again. Pure: imports no Django and does
no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from documents.cell import Better, StatisticsApplied, ValidityApplied
from documents.spec import CellChange, ClauseSpec, G3Spec
from gates.decisions.goodput import Slo
from gates.specs.schema import GOODPUT, METRICS


@dataclass(frozen=True)
class Clause:
    """One clause: metric(a)/metric(b) must change by at least `threshold` at each tier; or,
    a goodput floor (change "floor", a and b the same arm), arm a's share of requests within
    `slo` must be at least `threshold` percent. A goodput clause compares shares within `slo`."""

    index: int
    metric: str
    a: str
    b: str
    change: CellChange
    threshold: float
    tiers: tuple[int, ...]
    claimed: float | None = None
    slo: Slo | None = None

    @property
    def floor(self) -> bool:
        return self.change == "floor"

    @property
    def compare(self) -> str:
        return self.a if self.floor else f"{self.a}/{self.b}"

    @property
    def bound_ratio(self) -> float:
        """The threshold as a ratio A/B: at most this for reductions, at least it otherwise."""
        return change_to_ratio(self.change, self.threshold)

    @property
    def better(self) -> Better:
        return "higher" if self.metric == GOODPUT else METRICS[self.metric][2]


@dataclass(frozen=True)
class ValidityLimits:
    max_failed_pct: float
    min_external_hit_rate: float
    require_kv_exceeds_vram: bool

    def as_document(self) -> ValidityApplied:
        return {
            "max_failed_pct": self.max_failed_pct,
            "min_external_hit_rate": self.min_external_hit_rate,
            "require_kv_exceeds_vram": self.require_kv_exceeds_vram,
        }


@dataclass(frozen=True)
class StatisticsRules:
    """The spec's error bookkeeping: attempts the error budget is split over, the floor under
    a cell's sd of log-ratios, how many disturbed repetitions may be re-run, and the server
    preemptions in one bench beyond which its repetition counts as disturbed; whether a
    clause's sd is pooled across its tiers where the data support it; the stated noise, the
    share of the reference noise that floors a cell's sd, the level of the spread test, and
    the per-attempt level of the robust outlier screen and the per-repetition level of the
    within-repetition step check; whether an attempt after an inconclusive one carries its
    repetitions."""

    attempts: int = 1
    sd_floor: float = 0.0
    max_reruns: int = 0
    max_preemptions: int | None = None
    pool_tiers: bool = False
    carry_repetitions: bool = False
    noise_cv_pct: float | None = None
    sd_floor_fraction: float | None = None
    spread_level: float | None = None
    screen_level: float | None = None
    step_level: float | None = None

    def as_document(self) -> StatisticsApplied:
        return {
            "attempts": self.attempts,
            "sd_floor": self.sd_floor,
            "max_reruns": self.max_reruns,
            "max_preemptions": self.max_preemptions,
            "pool_tiers": self.pool_tiers,
            "carry_repetitions": self.carry_repetitions,
            "sd_floor_fraction": self.sd_floor_fraction,
            "spread_level": self.spread_level,
            "screen_level": self.screen_level,
            "step_level": self.step_level,
        }


@dataclass(frozen=True)
class G3Terms:
    version: int
    arms: dict[str, str]
    tiers: tuple[int, ...]
    min_repetitions: int
    max_repetitions: int
    confidence: float
    clauses: tuple[Clause, ...]
    validity: ValidityLimits
    statistics: StatisticsRules = StatisticsRules()


def parse_clauses(spec: G3Spec) -> list[Clause]:
    """The clauses of a valid G3 spec, "all" tiers spelt out."""
    tiers = tuple(spec["tiers"])
    return [_clause(item, i, tiers) for i, item in enumerate(spec["clauses"])]


def parse_g3_spec(spec: G3Spec) -> G3Terms:
    """Everything decide_g3 reads from a valid G3 spec."""
    repetitions, validity = spec["repetitions"], spec["validity"]
    return G3Terms(
        version=spec["version"],
        arms={role: str(kind) for role, kind in spec["arms"].items()},
        tiers=tuple(spec["tiers"]),
        min_repetitions=repetitions["min"],
        max_repetitions=repetitions["max"],
        confidence=float(spec["confidence"]),
        clauses=tuple(parse_clauses(spec)),
        validity=ValidityLimits(
            float(validity["max_failed_pct"]),
            float(validity["min_external_hit_rate"]),
            validity["require_kv_exceeds_vram"],
        ),
        statistics=parse_statistics(spec),
    )


def log_ratio_terms(parsed: G3Terms) -> G3Terms:
    """The terms without goodput floors: what the operating characteristic simulates. A floor's
    noise is its shares' binomial spread over the requests, not the log-ratio noise the OC is
    given, so its rows would be made up; the simulated family is the log-ratio cells only."""
    return replace(parsed, clauses=tuple(clause for clause in parsed.clauses if not clause.floor))


def parse_statistics(spec: G3Spec) -> StatisticsRules:
    """The spec's statistics rules; a spec written before them keeps per-attempt control."""
    rules = spec.get("statistics") or {}
    outliers = rules.get("outliers")
    return StatisticsRules(
        attempts=rules.get("attempts", 1),
        sd_floor=float(rules.get("sd_floor", 0.0)),
        max_reruns=outliers["max_reruns"] if outliers else 0,
        max_preemptions=outliers.get("max_preemptions") if outliers else None,
        pool_tiers=bool(rules.get("pool_tiers", False)),
        carry_repetitions=bool(rules.get("carry_repetitions", False)),
        noise_cv_pct=_optional_float(rules.get("noise_cv_pct")),
        sd_floor_fraction=_optional_float(rules.get("sd_floor_fraction")),
        spread_level=_optional_float(rules.get("spread_level")),
        screen_level=_optional_float(outliers.get("screen_level")) if outliers else None,
        step_level=_optional_float(outliers.get("step_level")) if outliers else None,
    )


def _optional_float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _clause(item: ClauseSpec, index: int, tiers: tuple[int, ...]) -> Clause:
    chosen = tiers if item["tiers"] == "all" else tuple(item["tiers"])
    slo = Slo.from_spec(item["slo"]) if "slo" in item else None
    if "arm" in item:  # a goodput floor: validation required its at_least_pct
        arm = item["arm"]
        return Clause(
            index, item["metric"], arm, arm, "floor", float(item["at_least_pct"]), chosen, slo=slo
        )
    a, b = item["compare"].split("/")
    change = item["change"]
    ratio = change == "ratio"
    threshold = item["at_least"] if ratio else item["at_least_pct"]
    claimed = item.get("claimed") if ratio else item.get("claimed_pct")
    return Clause(
        index,
        item["metric"],
        a,
        b,
        change,
        float(threshold),
        chosen,
        None if claimed is None else float(claimed),
        slo,
    )


def change_to_ratio(change: CellChange, value: float) -> float:
    """A change in clause units (reduction %, gain %, ratio x) as the ratio A/B; a floor's
    percent as the share it bars."""
    if change == "reduction":
        return 1 - value / 100
    if change == "gain":
        return 1 + value / 100
    if change == "floor":
        return value / 100
    return value


def ratio_to_change(change: CellChange, ratio: float) -> float:
    """The ratio A/B in clause units; the inverse of change_to_ratio."""
    if change == "reduction":
        return (1 - ratio) * 100
    if change in ("gain", "floor"):
        return (ratio - 1) * 100 if change == "gain" else ratio * 100
    return ratio
