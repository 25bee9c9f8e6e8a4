"""A G3 decision's parts: each clause cell (which clause and tier, its repetitions, its
numbers in clause units and on the ratio scale), the re-run plan and what the engine read.
Standard library only; documents.decision assembles the G3 result from these.
"""

# No `from __future__ import annotations`: Python 3.11 reads NotRequired from evaluated
# annotations only, and __required_keys__ must be right for code that inspects these types.

from typing import Any, Literal, NotRequired, TypedDict

from documents.spec import CellChange, SloSpec

RowVerdict = Literal["pass", "fail", "inconclusive", "invalid"]
CellVerdict = Literal["pass", "fail", "inconclusive"]
Better = Literal["lower", "higher"]
BandPosition = Literal["within", "below", "above"]


class BandContext(TypedDict):
    """The planner's band for a replayed cell's external hit rate at one concurrency tier, as
    the decision context carries it (band: [low, high]) or why there is none (missing)."""

    tier: int
    band: NotRequired[list[float]]
    missing: NotRequired[str]


class BandNumbers(TypedDict, total=False):
    """What a replay_band row shows (gates.decisions.cells.bands): advisory, never a verdict."""

    advisory: bool
    band_tier: int
    band_low: float
    band_high: float
    position: BandPosition
    expected: str
    observed: str
    external_hit_rate: float | None


class G3BandRow(BandNumbers):
    """One offload-arm cell of a G3 trace replay against the planner's band: the mean of its
    repetitions' rates (`rates`, by repetition), what that rate is (`hit_proof`)."""

    check: str
    arm: str
    tier: int
    verdict: RowVerdict
    cause: str
    rates: list[float]
    hit_proof: str


class TtftBandContext(TypedDict):
    """The planner's TTFT p50 band of a replayed trace at one tier (gates.planner.replay_band),
    as the decision context carries it: per arm kind [low_ms, high_ms], how many requests the
    model ran of how many sent, and what it assumed; or why there is none (missing)."""

    tier: int
    arms: NotRequired[dict[str, list[float]]]
    changes: NotRequired[dict[str, list[float]]]  # "offload/resident": [low, high], a ratio
    # the other statistics' changes by clause metric: "ttft_p99" -> as `changes` (TTFT p50)
    metric_changes: NotRequired[dict[str, dict[str, list[float]]]]
    missing: NotRequired[str]
    modelled: NotRequired[int]
    kept: NotRequired[int]
    refused: NotRequired[int]
    capped: NotRequired[bool]
    assumes: NotRequired[str]


class G3TtftBandRow(TypedDict):
    """One offload-arm cell of a G3 trace replay: its measured TTFT p50 (by kept repetition,
    their mean) against the planner's band; advisory, never a verdict."""

    check: str
    arm: str
    tier: int
    verdict: RowVerdict
    cause: str
    advisory: bool
    ttft_p50_ms: list[float]
    band_low_ms: NotRequired[float]
    band_high_ms: NotRequired[float]
    expected: NotRequired[str]
    measured_ms: NotRequired[float]
    position: NotRequired[BandPosition]
    observed: NotRequired[str]


class G3TtftChangeRow(TypedDict):
    """One offload-arm cell of a G3 trace replay against a baseline arm: its measured TTFT
    change of one statistic (`metric`, e.g. offload p99 / baseline p99 by kept repetition, their
    geometric mean) against the planner's paired band; advisory, never a verdict. A row stored
    before the statistic was named has no `metric`: it is TTFT p50's."""

    check: str
    arm: str
    baseline: str
    tier: int
    metric: NotRequired[str]
    verdict: RowVerdict
    cause: str
    advisory: bool
    ratios: list[float]
    band_low: NotRequired[float]
    band_high: NotRequired[float]
    expected: NotRequired[str]
    measured_ratio: NotRequired[float]
    position: NotRequired[BandPosition]
    observed: NotRequired[str]


class ValidityCheck(TypedDict):
    """A G3 validity rule on one measurement (or the run: arm, tier, repetition None); ok None:
    not observed, never invalidating. set_aside: a disturbance the outlier rule re-runs."""

    check: str
    arm: str | None
    tier: int | None
    repetition: int | None
    observed: Any
    limit: Any
    ok: bool | None
    reason: str
    set_aside: NotRequired[bool]


class Pair(TypedDict):
    """One repetition of a cell: metric(a), metric(b), log(a / b) and the ratio (None beyond
    exp()'s range)."""

    repetition: int
    a: float
    b: float
    log_ratio: float
    ratio: float | None


class Shown(TypedDict):
    estimate: str | None
    interval: str | None
    look: str


class RatioReadout(TypedDict):
    """Estimate and interval on the ratio scale; None beyond the readout's cap (unbounded)."""

    estimate: float | None
    low: float | None
    high: float | None
    bound: float


class LogRatioReadout(TypedDict):
    mean: float | None
    sd: float | None
    t_quantile: float | None
    # How many tiers of the clause its sd was pooled over (1: its own); only at a look.
    sd_pooled_over: NotRequired[int]


class ShareRepetition(TypedDict):
    """One repetition of a goodput floor: the arm's requests within the SLO, of those sent."""

    repetition: int
    met: int
    requests: int
    share: float


class ShareScale(TypedDict):
    """A floor's margins at its look (shares minus the bar, as fractions): mean, sd (at least
    the binomial floor) and the t quantile; None before the first look."""

    mean: float | None
    sd: float | None
    t_quantile: float | None


class GoodputFloorReadout(TypedDict):
    """A goodput floor cell: its arm, its bar in percent, each repetition's share, the scale."""

    arm: str
    bar_pct: float
    shares: list[ShareRepetition]
    scale: ShareScale


class SloShown(TypedDict):
    """A goodput clause's SLO as stated, and in words."""

    bounds: SloSpec
    text: str


class CellHead(TypedDict):
    """Which clause and tier a cell is, and the repetitions it was decided from.
    not_evaluated: the cell is on an arm this host cannot run (never a pass or a fail)."""

    clause: int
    metric: str
    compare: str
    change: CellChange
    tier: int
    threshold: float
    better: Better
    pairs: list[Pair]
    dropped: list[str]
    sd_floor: float | None
    repetitions_shown: str
    not_evaluated: NotRequired[bool]
    slo: NotRequired[SloShown]
    goodput: NotRequired[GoodputFloorReadout]


class CellReadout(TypedDict):
    """A cell's numbers in clause units (estimate, low, high) and how they read."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    look: int | None
    confidence_at_look: float | None
    shown: Shown
    ratio: RatioReadout
    log_ratio: LogRatioReadout


class G3Cell(CellHead, CellReadout):
    """One clause at one tier: what it is, its numbers, its verdict and why. A goodput floor
    (change "floor") has no pairs: its repetitions are in `goodput`, its numbers in percent."""

    verdict: RowVerdict
    cause: str


class SetAside(TypedDict):
    repetition: int
    reasons: list[str]


class NextStep(TypedDict):
    """decide: record the verdict; run: `more` repetitions first."""

    action: Literal["decide", "run"]
    more: int
    reason: str


class PlanSummary(TypedDict):
    """gates.decisions.statistics.inference.SequentialPlan, as the evidence shows it."""

    min_repetitions: int
    max_repetitions: int
    confidence: float
    attempts: int
    attempt_alpha: float
    cells: int
    looks: list[int]
    look_alphas: list[float]
    pass_critical_t: list[float]
    first_fail_critical_t: list[float]
    method: str


class StatisticsApplied(TypedDict):
    """gates.decisions.clauses.StatisticsRules: the spec's statistics, defaults filled in."""

    attempts: int
    sd_floor: float
    max_reruns: int
    max_preemptions: int | None
    pool_tiers: bool
    carry_repetitions: bool
    sd_floor_fraction: float | None
    spread_level: float | None
    screen_level: float | None
    step_level: float | None


class ValidityApplied(TypedDict):
    max_failed_pct: float
    min_external_hit_rate: float
    require_kv_exceeds_vram: bool


class NoiseFloorContext(TypedDict):
    metric: str
    sd_log_ratio: float


class G3Context(TypedDict):
    """What decide_g3 knows beyond the measurements (gates.decisions.validity.parse_context)."""

    kv_exceeds_vram: bool | None
    attempt: int
    noise_floor: NoiseFloorContext | None
    unavailable_arms: dict[str, str]
    # Repetitions 1..N of the measurements are an earlier attempt's (statistics.carry_repetitions).
    carried_repetitions: NotRequired[int]
    # A replayed trace: the planner's band for each tier's offload-arm external hit rate.
    replay_external_bands: NotRequired[list[BandContext]]
    # ... and its TTFT p50 band per tier and arm (gates.planner.replay_band).
    replay_ttft_predictions: NotRequired[list[TtftBandContext]]


class G3Inputs(TypedDict):
    arms: dict[str, str]
    tiers: list[int]
    plan: PlanSummary
    attempt: int
    statistics: StatisticsApplied
    validity_limits: ValidityApplied
    context: G3Context
    repetitions_seen: list[int]
