"""A decision result as typed JSON: what gates.decisions.decide_gate returns for each gate kind,
row by row (G1 checks, G2 and G4 checks, G3 clause cells and validity checks, the re-run plan),
plus what services add before it is stored (a G3 operating characteristic, a G4 soak summary)
and the stop-loss review. Standard library only.
"""

# No `from __future__ import annotations`: Python 3.11 reads NotRequired from evaluated
# annotations only, and __required_keys__ must be right for code that inspects these types.
from typing import Any, Literal, NotRequired, TypedDict

from documents.cell import (
    BandContext,
    BandNumbers,
    CellVerdict,
    G3BandRow,
    G3Cell,
    G3Inputs,
    G3TtftBandRow,
    G3TtftChangeRow,
    NextStep,
    RowVerdict,
    SetAside,
    ValidityCheck,
)
from documents.characteristic import NoCharacteristic, OperatingCharacteristic
from documents.spec import Expect

# infra_error is never an engine's verdict: services record it when the run itself broke.
Verdict = Literal["pass", "fail", "inconclusive", "invalid", "infra_error"]


# G1 -------------------------------------------------------------------------------------------


class G1Facts(TypedDict):
    """The probes' facts the checks read (gates.decisions.gathering.gather_g1); null unobserved."""

    gpu_inventory: dict[str, Any] | None
    vllm_version: str | None
    # Any engine's version (its profile's version probe); vLLM's equals vllm_version.
    engine_version: str | None
    host_memory_bytes: float | None
    free_disk_bytes: float | None
    kernel: str | None
    offload_tier: dict[str, Any] | None


class G1Check(TypedDict):
    """One expectation against what was observed; ok None: not observed."""

    check: str
    expected: Any
    observed: Any
    ok: bool | None
    verdict: CellVerdict
    cause: str


class G1Inputs(TypedDict):
    expect: Expect
    facts: G1Facts


# G2 -------------------------------------------------------------------------------------------


class G2Limits(TypedDict):
    timeout_s: float
    max_mismatch_pct: float
    min_external_hit_rate: float
    metric: str
    repetitions: int
    max_noise_pct: float
    confidence: float


class HealthObserved(TypedDict):
    healthy: bool | None
    seconds: float | None


class EquivalenceObserved(TypedDict):
    prompt: int
    reference: str | None
    offload: str | None


class G2Observed(TypedDict):
    health: HealthObserved | None
    equivalence: list[EquivalenceObserved] | None
    external_hit_rate: float | None
    # The A/A pairs as given: {repetition, a: run metrics, b: run metrics}.
    aa_pairs: list[dict[str, Any]] | None


class AAPair(TypedDict):
    repetition: Any
    a: float
    b: float
    log_ratio: float


class G2Numbers(BandNumbers, total=False):
    """What a G2 check shows beside its verdict; each check has its own few (replay_band: the
    planner's band for a replayed hit cell, BandNumbers; advisory, never the verdict)."""

    timeout_s: float
    seconds: float | None
    prompts: int
    compared: int
    mismatched: list[int]
    mismatch_pct: float
    max_mismatch_pct: float
    min_external_hit_rate: float
    metric: str
    repetitions: int
    pairs: list[AAPair]
    confidence: float
    max_noise_pct: float
    mean_log_ratio: float
    sd_log_ratio: float
    low_ratio: float
    high_ratio: float
    noise_pct: float


class G2Check(G2Numbers):
    check: str
    verdict: RowVerdict
    cause: str


class G2Context(TypedDict):
    replay_external_band: BandContext


class G2Inputs(TypedDict):
    limits: G2Limits
    prompt_count: int
    observed: G2Observed
    context: NotRequired[G2Context]  # only when the hit cell replayed a trace


# The decisions --------------------------------------------------------------------------------


class G1Decision(TypedDict):
    gate: Literal["G1"]
    spec_version: int | None
    verdict: Verdict
    reasons: list[str]
    clauses: list[G1Check]
    validity: list[ValidityCheck]  # always empty: G1 has no validity rules
    inputs: G1Inputs


class G2Decision(TypedDict):
    gate: Literal["G2"]
    spec_version: int | None
    verdict: Verdict
    reasons: list[str]
    clauses: list[G2Check]
    validity: list[ValidityCheck]  # always empty: an invalid A/A pair is its check's verdict
    inputs: G2Inputs
    notes: NotRequired[list[str]]  # a replayed hit cell outside the planner's band


class G3Decision(TypedDict):
    gate: Literal["G3"]
    spec_version: int
    verdict: Verdict
    reasons: list[str]
    notes: list[str]
    clauses: list[G3Cell]
    validity: list[ValidityCheck]
    set_aside: list[SetAside]
    plan: NextStep
    inputs: G3Inputs
    # Each offload-arm cell of a replayed trace against the planner's band (advisory).
    replay_bands: NotRequired[list[G3BandRow]]
    # Each offload-arm cell's measured TTFT p50 against the planner's band (advisory).
    replay_ttft_bands: NotRequired[list[G3TtftBandRow]]
    replay_ttft_changes: NotRequired[list[G3TtftChangeRow]]
    # Added by gates.services.runs.evaluation before the decision is recorded.
    operating_characteristic: NotRequired[OperatingCharacteristic | NoCharacteristic]


class ChangePoint(TypedDict):
    seq: int
    hour: float
    before: float
    after: float


class G4Numbers(TypedDict, total=False):
    """What a G4 check shows beside its verdict; each check has its own few."""

    crashed_windows: list[int]
    completed: float
    failed: float
    best_possible_pct: float
    levels: list[float]
    change_points: list[ChangePoint]
    slope_low: float
    slope_high: float
    confidence: float
    min: float
    median: float
    windows: int
    stopped_seq: int
    stopped_hour: float


class G4Check(G4Numbers):
    check: str
    verdict: RowVerdict
    observed: float | None
    limit: float
    cause: str


class G4Limits(TypedDict):
    # How the soak's windows were summarised (gates/decisions/g4_summary.py): windows per
    # change-point block, and every how-manyth memory sample the growth slope reads.
    block_windows: int
    memory_stride: int
    duration_s: float
    window_s: float
    max_crashes: int
    max_error_rate_pct: float
    max_throughput_drift_pct: float
    max_ttft_p99_change_pct: float
    max_memory_growth_mib_per_h: float
    max_unobserved_pct: float


class G4Span(TypedDict):
    """The soak's span in unix seconds; observed_s: from start to the last window's end."""

    started_at: float
    ended_at: float
    duration_s: float
    observed_s: float


class G4Inputs(TypedDict):
    limits: G4Limits
    span: G4Span | None


class G4Decision(TypedDict):
    gate: Literal["G4"]
    spec_version: int | None
    verdict: Verdict
    reasons: list[str]
    clauses: list[G4Check]
    validity: list[ValidityCheck]  # always empty: unobserved time is its check's verdict
    inputs: G4Inputs
    # Added by gates.services.soak (and the evidence verifier) before it is recorded: the
    # agent's account of the soak (restarts, gaps, why it stopped).
    soak: NotRequired[dict[str, Any]]


Decision = G1Decision | G2Decision | G3Decision | G4Decision


class StopLossReview(TypedDict):
    """Whether a gate's attempt history opens stop-loss review (decisions.stop_loss_review)."""

    review: bool
    failures: int
    max_attempts: int
    attempts_left: int
    reason: str
