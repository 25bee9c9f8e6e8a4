"""A gate spec as typed JSON: one TypedDict per gate kind and per section, key for key the JSON
schema of gates/specs/schema.py (which builds its vocabularies from the Literals here).
gates.specs.validation.parse_spec is the only way in; types cannot say the schema's bounds,
patterns or cross-field rules, so an unchecked dict is never a Spec. Standard library only.
"""

# No `from __future__ import annotations`: Python 3.11 reads NotRequired from evaluated
# annotations only, and __required_keys__ must be right for code that inspects these types.
from typing import Literal, NotRequired, TypedDict

GateKind = Literal["G1", "G2", "G3", "G4"]
Dataset = Literal["random", "prefix_repetition", "cold_recovery", "sharegpt"]
ArmKind = Literal["resident", "offload", "recompute"]
ChangeKind = Literal["reduction", "gain", "ratio"]
# What a G3 cell holds its bar as: a change of A against B, or a goodput floor on one arm.
CellChange = Literal["reduction", "gain", "ratio", "floor"]
GpuVendor = Literal["nvidia", "amd"]


class StopLoss(TypedDict):
    max_attempts: int


TraceFormatName = Literal["mooncake", "bailian", "burstgpt", "azure", "sharegpt"]


class TraceRef(TypedDict):
    """The customer's trace a workload replays, named by the SHA-256 of the uploaded file."""

    sha256: str
    format: TraceFormatName
    block_tokens: NotRequired[int | None]
    time_scale: NotRequired[float]
    sample_fraction: NotRequired[float]
    warmup_s: NotRequired[float]
    max_arrival_error_p99_ms: NotRequired[float]


class Workload(TypedDict):
    """A bench workload. Which length fields are present depends on `dataset`
    (runners.workloads.DATASET_FIELDS; the schema requires them per dataset)."""

    dataset: Dataset
    num_prompts: int
    seed: int
    input_len: NotRequired[int]
    prefix_len: NotRequired[int]
    suffix_len: NotRequired[int]
    output_len: NotRequired[int]
    cold_recovery: NotRequired[bool]
    max_concurrency: NotRequired[int]
    num_prefixes: NotRequired[int]
    trace: NotRequired[TraceRef]


class Server(TypedDict, total=False):
    model_path: str
    tensor_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    offload_gib: float


# G1 -------------------------------------------------------------------------------------------


class OffloadTierExpectation(TypedDict):
    required: bool
    min_capacity_gib: float | None


class Expect(TypedDict):
    """G1's expected inventory; an expectation left out or null is not checked."""

    gpu_count: int
    gpu_vendor: NotRequired[GpuVendor | None]
    gpu_model_pattern: NotRequired[str | None]
    gpu_memory_min_gib: NotRequired[float | None]
    driver_min: NotRequired[str | None]
    cuda_min: NotRequired[str | None]
    rocm_min: NotRequired[str | None]
    vllm_min: NotRequired[str | None]
    engine_min: NotRequired[str | None]
    host_memory_min_gib: NotRequired[float | None]
    offload_tier: NotRequired[OffloadTierExpectation]
    free_disk_min_gib: NotRequired[float | None]
    kernel_pattern: NotRequired[str | None]


class G1Spec(TypedDict):
    gate: Literal["G1"]
    version: int
    expect: Expect
    stop_loss: StopLoss


# G2 -------------------------------------------------------------------------------------------


class Health(TypedDict):
    timeout_s: int


class Equivalence(TypedDict):
    prompts: list[str]
    max_tokens: int
    max_mismatch_pct: float


class OffloadHit(TypedDict):
    min_external_hit_rate: float
    workload: Workload
    tier: int


class NoiseFloor(TypedDict):
    repetitions: int
    metric: str
    max_noise_pct: float
    tier: int
    workload: Workload
    confidence: NotRequired[float]


class G2Spec(TypedDict):
    gate: Literal["G2"]
    version: int
    health: Health
    equivalence: Equivalence
    offload_hit: OffloadHit
    noise_floor: NoiseFloor
    stop_loss: StopLoss
    server: NotRequired[Server]


# G3 -------------------------------------------------------------------------------------------


class Arms(TypedDict):
    """Arm role -> the kind of server it runs; a clause compares two roles ("offload/baseline")."""

    baseline: ArmKind
    offload: ArmKind
    recompute: NotRequired[ArmKind]


class Repetitions(TypedDict):
    min: int
    max: int


class SloSpec(TypedDict):
    """A goodput clause's service-level objective: a request meets it when it completed within
    every stated bound (at least one is stated)."""

    ttft_ms: NotRequired[float]
    tpot_ms: NotRequired[float]


class ClauseSpec(TypedDict):
    """A clause as written. A ratio clause has at_least (and claimed), a reduction or gain
    at_least_pct (and claimed_pct); the validator refuses the other pair. A goodput clause
    (metric "goodput") states its `slo`; it either compares arms like any metric or, with `arm`
    instead of compare and change, holds one arm's share of requests within the SLO to
    at_least_pct (a floor)."""

    metric: str
    compare: NotRequired[str]
    change: NotRequired[ChangeKind]
    slo: NotRequired[SloSpec]
    arm: NotRequired[str]
    tiers: Literal["all"] | list[int]
    at_least_pct: NotRequired[float]
    at_least: NotRequired[float]
    claimed_pct: NotRequired[float]
    claimed: NotRequired[float]


class Validity(TypedDict):
    max_failed_pct: float
    min_external_hit_rate: float
    require_kv_exceeds_vram: bool


class Outliers(TypedDict):
    max_reruns: int
    max_preemptions: NotRequired[int]
    screen_level: NotRequired[float]
    step_level: NotRequired[float]


class Statistics(TypedDict, total=False):
    """Optional, key by key: a spec written before it keeps per-attempt control."""

    attempts: int
    sd_floor: float
    noise_cv_pct: float
    noise_source: str
    sd_floor_fraction: float
    spread_level: float
    min_power: float
    require_power: bool
    pool_tiers: bool
    carry_repetitions: bool
    outliers: Outliers


class G3Spec(TypedDict):
    gate: Literal["G3"]
    version: int
    workload: Workload
    arms: Arms
    tiers: list[int]
    repetitions: Repetitions
    confidence: float
    clauses: list[ClauseSpec]
    validity: Validity
    stop_loss: StopLoss
    statistics: NotRequired[Statistics]
    server: NotRequired[Server]


# G4 -------------------------------------------------------------------------------------------


class Limits(TypedDict):
    max_crashes: int
    max_error_rate_pct: float
    max_throughput_drift_pct: float
    max_ttft_p99_change_pct: float
    max_memory_growth_mib_per_h: float
    max_unobserved_pct: float


class Soak(TypedDict, total=False):
    """How the soak agent treats a crashed server and the host's disk (docs/soak.md)."""

    restart_on_crash: bool
    max_restarts: int
    free_space_floor_gib: float


class Retention(TypedDict):
    """Which windows' raw files are kept once the evidence is sealed (docs/soak.md)."""

    keep_every_nth_window: int
    keep_after_sealed_days: float


class G4Spec(TypedDict):
    gate: Literal["G4"]
    version: int
    duration_h: float
    window_min: float
    load: Workload
    limits: Limits
    stop_loss: StopLoss
    soak: NotRequired[Soak]
    retention: NotRequired[Retention]
    server: NotRequired[Server]


Spec = G1Spec | G2Spec | G3Spec | G4Spec
