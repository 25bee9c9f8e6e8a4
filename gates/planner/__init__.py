"""KV headroom planner: KV demand against the VRAM left after weights, and whether an offload
tier can pay. Pure: imports no Django and does no I/O. The arithmetic lives in capacity.py,
architectures and presets in architectures.py (both re-exported here); the figure in charts.py,
and the link to engagements and G3 specs in spec_check.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from gates.planner.architectures import (
    KV_DTYPE_BYTES,
    MAX_COUNT,
    STATEFUL_LAYER_TYPES,
    WEIGHT_DTYPE_BYTES,
    ModelArch,
    PlannerError,
    check,
    model_from_config,
    model_from_fields,
    parse_dtype,
    parse_number,
    parse_optional_int,
    parse_required_int,
    preset_display_names,
    preset_for_model_name,
    preset_model,
    preset_names,
)
from gates.planner.capacity import (
    DEFAULT_RESERVED_FRACTION,
    GIB,
    MAX_GPU_MEM_GIB,
    Deployment,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    kv_capacity_per_gpu,
    kv_demand_per_gpu,
    kv_heads_per_gpu,
    max_concurrency_at,
    max_context_at,
    sequence_bytes_per_gpu,
    sequences_per_replica,
    validate_deployment,
    validate_workload,
    weight_bytes,
    weight_bytes_per_gpu,
    workload_exceeds_vram,
)

__all__ = [
    "DEFAULT_RESERVED_FRACTION",
    "GIB",
    "KV_DTYPE_BYTES",
    "MAX_COUNT",
    "MAX_GPU_MEM_GIB",
    "MIN_OFFLOAD_SAVING_SHARE",
    "REQUEST_FIELDS",
    "STATEFUL_LAYER_TYPES",
    "WEIGHT_DTYPE_BYTES",
    "Boundary",
    "Deployment",
    "ModelArch",
    "PlanRequest",
    "PlanResult",
    "PlannerError",
    "Recommendation",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "kv_capacity_per_gpu",
    "kv_demand_per_gpu",
    "kv_heads_per_gpu",
    "max_concurrency_at",
    "max_context_at",
    "model_from_config",
    "model_from_fields",
    "plan",
    "preset_display_names",
    "preset_for_model_name",
    "preset_model",
    "preset_names",
    "recommend",
    "request_from_dict",
    "sequence_bytes_per_gpu",
    "sequences_per_replica",
    "validate_deployment",
    "validate_workload",
    "weight_bytes",
    "weight_bytes_per_gpu",
    "workload_exceeds_vram",
]

# Policy: a joint test is worth booking only if offload can serve at least this share of prefill.
MIN_OFFLOAD_SAVING_SHARE = 0.10
Recommendation = Literal["keep_resident", "offload_worth_testing", "offload_will_not_help"]


@dataclass(frozen=True)
class PlanRequest:
    deployment: Deployment
    concurrency: int
    context_tokens: int
    reuse_ratio: float = 0.0


@dataclass(frozen=True)
class Boundary:
    max_concurrency_at_context: int
    max_context_at_concurrency: int | None  # None: unbounded (every KV layer is windowed)


@dataclass(frozen=True)
class PlanResult:
    model: str
    kv_dtype: str
    gpus: int
    tensor_parallel_size: int
    replicas: int
    concurrency: int
    context_tokens: int
    reuse_ratio: float
    reserved_fraction: float
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    weight_bytes: int
    weight_bytes_per_gpu: int
    kv_capacity_per_gpu_bytes: int
    kv_capacity_bytes: int
    sequences_per_replica: int
    kv_demand_per_gpu_bytes: int
    kv_demand_bytes: int
    fits: bool
    headroom_bytes: int
    spill_fraction: float
    offload_capacity_needed_bytes: int
    prefill_saving_share: float
    resident_saving_share: float
    offload_saving_share: float
    recommendation: Recommendation
    reasons: tuple[str, ...]
    boundary: Boundary
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reasons"] = list(self.reasons)
        data["notes"] = list(self.notes)
        return data


# ---- the plan ---------------------------------------------------------------------------------


def plan(request: PlanRequest) -> PlanResult:
    """Demand vs. capacity at the requested concurrency and context, and what to do about it."""
    deployment = request.deployment
    validate_deployment(deployment)
    validate_workload(request.concurrency, request.context_tokens, request.reuse_ratio)
    capacity = kv_capacity_per_gpu(deployment)
    demand = kv_demand_per_gpu(deployment, request.concurrency, request.context_tokens)
    fits = capacity > 0 and demand <= capacity
    spill = 0.0 if fits else 1.0 - capacity / demand
    resident = request.reuse_ratio * (1.0 - spill)
    result = PlanResult(
        model=deployment.model.name,
        kv_dtype=deployment.kv_dtype,
        gpus=deployment.gpus,
        tensor_parallel_size=deployment.tp,
        replicas=deployment.replicas,
        concurrency=request.concurrency,
        context_tokens=request.context_tokens,
        reuse_ratio=request.reuse_ratio,
        reserved_fraction=deployment.reserved_fraction,
        kv_bytes_per_token=kv_bytes_per_token(deployment.model, deployment.kv_dtype),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(deployment),
        weight_bytes=weight_bytes(deployment),
        weight_bytes_per_gpu=weight_bytes_per_gpu(deployment),
        kv_capacity_per_gpu_bytes=capacity,
        kv_capacity_bytes=capacity * deployment.gpus,
        sequences_per_replica=sequences_per_replica(deployment, request.concurrency),
        kv_demand_per_gpu_bytes=demand,
        kv_demand_bytes=demand * deployment.gpus,
        fits=fits,
        headroom_bytes=(capacity - demand) * deployment.gpus,
        spill_fraction=spill,
        # Offload connectors write every block through, so the tier holds the whole working set.
        offload_capacity_needed_bytes=0 if fits else demand * deployment.gpus,
        prefill_saving_share=request.reuse_ratio,
        resident_saving_share=resident,
        offload_saving_share=request.reuse_ratio - resident,
        recommendation="keep_resident",
        reasons=(),
        boundary=Boundary(
            max_concurrency_at_context=max_concurrency_at(deployment, request.context_tokens),
            max_context_at_concurrency=max_context_at(deployment, request.concurrency),
        ),
        notes=deployment.model.notes,
    )
    recommendation, reasons = recommend(result, deployment.model.max_context)
    return replace(result, recommendation=recommendation, reasons=reasons)


def recommend(
    result: PlanResult, max_context: int | None = None
) -> tuple[Recommendation, tuple[str, ...]]:
    """The field's rule: fits -> keep resident; short and reused -> offload can pay; else not."""
    reasons = [_demand_sentence(result)]
    if max_context and result.context_tokens > max_context:
        reasons.append(
            f"The context of {result.context_tokens:,} tokens is beyond the model's "
            f"configured maximum of {max_context:,}."
        )
    if result.kv_capacity_per_gpu_bytes == 0:
        reasons.append(
            "Weights and the reserve leave no VRAM for KV cache: add GPUs or raise tensor "
            "parallelism first; offloading KV cannot make the weights fit."
        )
        return "offload_will_not_help", tuple(reasons)
    if result.fits:
        reasons.append(
            f"It fits with {_gib(result.headroom_bytes // result.gpus)} per GPU to spare, so keep "
            "KV resident: an offload tier would add nothing at this load."
        )
        return "keep_resident", tuple(reasons)
    reasons.append(
        f"It is short by {_gib(-result.headroom_bytes // result.gpus)} per GPU: "
        f"{result.spill_fraction:.0%} of the working set cannot stay in VRAM."
    )
    if result.offload_saving_share < MIN_OFFLOAD_SAVING_SHARE:
        reasons.append(
            f"With a reuse ratio of {result.reuse_ratio:.0%}, offload could spare at most "
            f"{result.offload_saving_share:.0%} of prefill, under the "
            f"{MIN_OFFLOAD_SAVING_SHARE:.0%} that makes a joint test worth it: requests without "
            "shared prefixes recompute anyway."
        )
        return "offload_will_not_help", tuple(reasons)
    reasons.append(
        f"With a reuse ratio of {result.reuse_ratio:.0%}, about "
        f"{result.offload_saving_share:.0%} of prefill could be loaded from an offload tier of "
        f"at least {_gib(result.offload_capacity_needed_bytes)} instead of recomputed."
    )
    return "offload_worth_testing", tuple(reasons)


def _demand_sentence(result: PlanResult) -> str:
    return (
        f"{result.concurrency} concurrent requests of {result.context_tokens:,} tokens need "
        f"{_gib(result.kv_demand_per_gpu_bytes)} of KV per GPU "
        f"({result.kv_bytes_per_token:,} bytes per token in {result.kv_dtype}); "
        f"{_gib(result.kv_capacity_per_gpu_bytes)} per GPU is left after "
        f"{_gib(result.weight_bytes_per_gpu)} of weights and the "
        f"{result.reserved_fraction:.0%} reserve."
    )


def _gib(value: int) -> str:
    return f"{value / GIB:,.1f} GiB"


# ---- validation and parsing -------------------------------------------------------------------

REQUEST_FIELDS = (
    *("model", "config", "gpus", "gpu_mem_gib", "tensor_parallel_size", "kv_dtype"),
    *("weight_bytes", "weight_dtype", "reserved_fraction", "concurrency", "context_tokens"),
    "reuse_ratio",
)


def request_from_dict(data: Mapping[str, Any]) -> PlanRequest:
    """A validated PlanRequest from JSON-shaped data (the REST body, the command's arguments)."""
    if not isinstance(data, Mapping):
        raise PlannerError("request", "must be a JSON object")
    for name in data:
        check(name in REQUEST_FIELDS, str(name), "unknown field")
    deployment = Deployment(
        model=_request_model(data),
        gpus=parse_required_int(data, "gpus", "", minimum=None),
        gpu_mem_gib=parse_number(data, "gpu_mem_gib", None),
        tensor_parallel_size=parse_optional_int(data, "tensor_parallel_size", "", minimum=None),
        kv_dtype=parse_dtype(data.get("kv_dtype", "bf16"), KV_DTYPE_BYTES, "kv_dtype"),
        weight_bytes=parse_optional_int(data, "weight_bytes", "", minimum=0),
        weight_dtype=_optional_dtype(data.get("weight_dtype")),
        reserved_fraction=parse_number(data, "reserved_fraction", DEFAULT_RESERVED_FRACTION),
    )
    request = PlanRequest(
        deployment=deployment,
        concurrency=parse_required_int(data, "concurrency", "", minimum=None),
        context_tokens=parse_required_int(data, "context_tokens", "", minimum=None),
        reuse_ratio=parse_number(data, "reuse_ratio", 0.0),
    )
    validate_deployment(deployment)
    validate_workload(request.concurrency, request.context_tokens, request.reuse_ratio)
    return request


def _request_model(data: Mapping[str, Any]) -> ModelArch:
    has_model, has_config = data.get("model") is not None, data.get("config") is not None
    check(has_model != has_config, "model", "give exactly one of model and config")
    if has_config:
        return model_from_config(data["config"])
    if isinstance(data["model"], str):
        return preset_model(data["model"])
    return model_from_fields(data["model"])


def _optional_dtype(value: Any) -> str | None:
    return None if value is None else parse_dtype(value, WEIGHT_DTYPE_BYTES, "weight_dtype")
