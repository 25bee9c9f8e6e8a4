"""KV headroom planner: model KV size (presets, config.json), KV demand against the VRAM left
after weights, and whether an offload tier can pay. Pure: imports no Django and does no I/O
beyond reading its packaged preset file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

GIB = 1024**3
KV_DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
WEIGHT_DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}
# vLLM's default --gpu-memory-utilization is 0.9: it never plans with the last 10 % of VRAM.
DEFAULT_RESERVED_FRACTION = 0.10
# Policy: a joint test is worth booking only if offload can serve at least this share of prefill.
MIN_OFFLOAD_SAVING_SHARE = 0.10
MAX_COUNT = 2**63 - 1  # beyond any real count of bytes or tokens; keeps float maths finite
MAX_GPU_MEM_GIB = 2**20
# Layer kinds that keep a fixed-size recurrent state instead of per-token KV.
STATEFUL_LAYER_TYPES = frozenset({"linear_attention", "mamba", "conv"})

Recommendation = Literal["keep_resident", "offload_worth_testing", "offload_will_not_help"]


class PlannerError(ValueError):
    """Bad planner input; `field` names the offending request or config field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ModelArch:
    """What decides KV size. `layers` counts layers that cache KV; MoE plays no part."""

    name: str
    layers: int
    kv_heads: int = 0
    head_dim: int = 0
    mla_latent_dim: int | None = None  # MLA: kv_lora_rank + qk_rope_head_dim, one per layer
    sliding_window: int | None = None
    sliding_layers: int = 0
    max_context: int | None = None
    parameters: int | None = None
    weight_dtype: str = "bf16"
    weight_bytes: int | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Deployment:
    """The model on its GPUs: what fixes the KV capacity."""

    model: ModelArch
    gpus: int
    gpu_mem_gib: float
    tensor_parallel_size: int | None = None  # None: one replica over all GPUs
    kv_dtype: str = "bf16"
    weight_bytes: int | None = None  # None: from the model's parameters x weight dtype
    weight_dtype: str | None = None
    reserved_fraction: float = DEFAULT_RESERVED_FRACTION

    @property
    def tp(self) -> int:
        return self.gpus if self.tensor_parallel_size is None else self.tensor_parallel_size

    @property
    def replicas(self) -> int:
        return self.gpus // self.tp


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


# ---- models: presets, architecture fields, Hugging Face config.json ----------------------------


def model_from_fields(data: Mapping[str, Any], path: str = "model") -> ModelArch:
    """A model given by its architecture fields (the preset file's format)."""
    if not isinstance(data, Mapping):
        raise PlannerError(path, "must be a preset name or an object of architecture fields")
    latent = _optional_int(data, "mla_latent_dim", path)
    window = _optional_int(data, "sliding_window", path)
    model = ModelArch(
        name=str(data.get("name") or data.get("display_name") or "custom"),
        layers=_required_int(data, "layers", path),
        kv_heads=0 if latent else _required_int(data, "kv_heads", path),
        head_dim=0 if latent else _required_int(data, "head_dim", path),
        mla_latent_dim=latent,
        sliding_window=window,
        sliding_layers=(_optional_int(data, "sliding_layers", path) or 0) if window else 0,
        max_context=_optional_int(data, "max_context", path),
        parameters=_optional_int(data, "parameters", path),
        weight_dtype=_dtype(data.get("weight_dtype", "bf16"), WEIGHT_DTYPE_BYTES, path),
        weight_bytes=_optional_int(data, "weight_bytes", path, minimum=0),
    )
    if model.sliding_layers > model.layers:
        raise PlannerError(f"{path}.sliding_layers", "cannot exceed layers")
    return model


def model_from_config(config: Mapping[str, Any], path: str = "config") -> ModelArch:
    """A model from a Hugging Face config.json (multimodal configs: their `text_config`)."""
    if not isinstance(config, Mapping):
        raise PlannerError(path, "must be a JSON object (the model's config.json)")
    if config.get("text_config") is not None:
        return model_from_config(config["text_config"], f"{path}.text_config")
    layers = _required_int(config, "num_hidden_layers", path)
    common = {
        "name": str(config.get("_name_or_path") or config.get("model_type") or "config.json"),
        "max_context": _optional_int(config, "max_position_embeddings", path),
    }
    if config.get("kv_lora_rank") is not None:
        # MLA caches one compressed latent plus the shared RoPE key per layer, not K and V per head.
        latent = _required_int(config, "kv_lora_rank", path)
        rope = _required_int(config, "qk_rope_head_dim", path)
        return ModelArch(layers=layers, mla_latent_dim=latent + rope, **common)
    heads = _required_int(config, "num_attention_heads", path)
    kv_heads = _optional_int(config, "num_key_value_heads", path) or heads
    head_dim = _optional_int(config, "head_dim", path) or _derived_head_dim(config, heads, path)
    kv_layers, window, sliding, notes = _attention_layers(config, layers, path)
    return ModelArch(
        layers=kv_layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        sliding_window=window,
        sliding_layers=sliding,
        notes=notes,
        **common,
    )


def _derived_head_dim(config: Mapping[str, Any], heads: int, path: str) -> int:
    hidden = _required_int(config, "hidden_size", path)
    if hidden % heads:
        raise PlannerError(f"{path}.head_dim", "absent, and hidden_size is not a multiple of heads")
    return hidden // heads


def _attention_layers(
    config: Mapping[str, Any], layers: int, path: str
) -> tuple[int, int | None, int, tuple[str, ...]]:
    """(layers caching KV, window, windowed layers, notes) from layer_types and sliding_window."""
    types = config.get("layer_types")
    if types is None:
        if config.get("sliding_window") and config.get("use_sliding_window") is not False:
            note = "sliding_window without layer_types: every layer counted as full attention"
            return layers, None, 0, (f"{note} (an upper bound).",)
        return layers, None, 0, ()
    if not isinstance(types, list) or len(types) != layers:
        raise PlannerError(f"{path}.layer_types", f"must be a list of {layers} layer types")
    if not all(isinstance(kind, str) for kind in types):
        raise PlannerError(f"{path}.layer_types", "must list layer types as strings")
    stateful = sum(kind in STATEFUL_LAYER_TYPES for kind in types)
    sliding = sum(kind == "sliding_attention" for kind in types)
    notes = (f"{stateful} layers keep a fixed-size state and cache no KV.",) if stateful else ()
    if not sliding:
        return layers - stateful, None, 0, notes
    window = _required_int(config, "sliding_window", path)
    return layers - stateful, window, sliding, notes


@cache
def _preset_table() -> dict[str, dict[str, Any]]:
    text = resources.files("gates").joinpath("model_presets.json").read_text(encoding="utf-8")
    return json.loads(text)["models"]


def preset_names() -> list[str]:
    return sorted(_preset_table())


def preset_model(name: str) -> ModelArch:
    table = _preset_table()
    for key, entry in table.items():
        if name == key or name in entry.get("aliases", ()):
            return model_from_fields({**entry, "name": key}, path=f"presets.{key}")
    raise PlannerError("model", f"unknown model {name!r}; presets: {', '.join(sorted(table))}")


# ---- KV arithmetic ---------------------------------------------------------------------------


def kv_bytes_per_token(model: ModelArch, kv_dtype: str = "bf16") -> int:
    """Bytes of KV one token adds over all layers, one copy, no tensor-parallel split."""
    elements = model.mla_latent_dim or 2 * model.kv_heads * model.head_dim
    return model.layers * elements * _dtype_bytes(kv_dtype)


def kv_heads_per_gpu(model: ModelArch, tp: int) -> int:
    """KV heads one tensor-parallel rank holds; heads replicate when TP exceeds their count."""
    if model.mla_latent_dim:
        return 1
    if model.kv_heads % tp == 0:
        return model.kv_heads // tp
    if tp % model.kv_heads == 0:
        return 1
    raise PlannerError(
        "tensor_parallel_size",
        f"{tp} neither divides nor is a multiple of the model's {model.kv_heads} KV heads",
    )


def kv_bytes_per_token_per_gpu(deployment: Deployment) -> int:
    model = deployment.model
    # The MLA latent is not split by head: every tensor-parallel rank caches all of it.
    elements = model.mla_latent_dim or 2 * kv_heads_per_gpu(model, deployment.tp) * model.head_dim
    return model.layers * elements * _dtype_bytes(deployment.kv_dtype)


def sequence_bytes_per_gpu(deployment: Deployment, tokens: int) -> int:
    """KV of one sequence of `tokens` tokens on each GPU of its replica."""
    model = deployment.model
    per_layer = kv_bytes_per_token_per_gpu(deployment) // model.layers
    windowed = min(tokens, model.sliding_window or tokens)
    full_layers = model.layers - model.sliding_layers
    return per_layer * (full_layers * tokens + model.sliding_layers * windowed)


def weight_bytes(deployment: Deployment) -> int:
    model = deployment.model
    if deployment.weight_bytes is not None:
        return deployment.weight_bytes
    if deployment.weight_dtype is None and model.weight_bytes is not None:
        return model.weight_bytes
    if model.parameters is None:
        raise PlannerError(
            "weight_bytes",
            "required for a model without a parameter count (use the checkpoint size, e.g. "
            "metadata.total_size in model.safetensors.index.json)",
        )
    dtype = deployment.weight_dtype or model.weight_dtype
    return math.ceil(model.parameters * WEIGHT_DTYPE_BYTES[dtype])


def kv_capacity_per_gpu(deployment: Deployment) -> int:
    """VRAM left for KV on each GPU after the reserve and that GPU's share of the weights."""
    usable = deployment.gpu_mem_gib * GIB * (1.0 - deployment.reserved_fraction)
    return max(0, math.floor(usable) - weight_bytes_per_gpu(deployment))


def weight_bytes_per_gpu(deployment: Deployment) -> int:
    return -(-weight_bytes(deployment) // deployment.tp)  # ceiling, in exact integers


def sequences_per_replica(deployment: Deployment, concurrency: int) -> int:
    # Requests spread over data-parallel replicas; the busiest one must hold the rounded-up share.
    return -(-concurrency // deployment.replicas)


def kv_demand_per_gpu(deployment: Deployment, concurrency: int, context_tokens: int) -> int:
    seqs = sequences_per_replica(deployment, concurrency)
    return seqs * sequence_bytes_per_gpu(deployment, context_tokens)


def max_concurrency_at(deployment: Deployment, context_tokens: int) -> int:
    per_sequence = sequence_bytes_per_gpu(deployment, context_tokens)
    return kv_capacity_per_gpu(deployment) // per_sequence * deployment.replicas


def max_context_at(deployment: Deployment, concurrency: int) -> int | None:
    """Longest context every one of `concurrency` sequences can have and still fit; None = any."""
    model = deployment.model
    budget = kv_capacity_per_gpu(deployment) // sequences_per_replica(deployment, concurrency)
    per_layer = kv_bytes_per_token_per_gpu(deployment) // model.layers
    full_rate = per_layer * (model.layers - model.sliding_layers)
    all_rate = per_layer * model.layers
    window = model.sliding_window or 0
    if window and budget >= all_rate * window:
        if full_rate == 0:
            return None
        return window + (budget - all_rate * window) // full_rate
    return budget // all_rate


def workload_exceeds_vram(
    deployment: Deployment,
    *,
    concurrency: int,
    prefix_tokens: int,
    suffix_tokens: int,
    output_tokens: int,
    distinct_prefixes: int | None = None,
) -> bool:
    """Does this workload's KV overflow the VRAM left for KV (so an offload tier is exercised)?

    `distinct_prefixes` is how many different prefixes the workload cycles through (vllm bench's
    prefix-repetition prefixes, or every prompt of a cold-recovery run): for reuse to hit, all of
    them stay cached, shared by the requests that carry them. None: each concurrent request
    brings its own prefix and shares none.
    """
    validate_deployment(deployment)
    lengths = {"prefix_tokens": prefix_tokens, "suffix_tokens": suffix_tokens}
    for name, tokens in {**lengths, "output_tokens": output_tokens}.items():
        _check(tokens >= 0, name, "cannot be negative")
    _validate_workload(concurrency, prefix_tokens + suffix_tokens + output_tokens, 0.0)
    _check(distinct_prefixes is None or distinct_prefixes >= 1, "distinct_prefixes", "must be >= 1")
    seqs = sequences_per_replica(deployment, concurrency)
    prefix = sequence_bytes_per_gpu(deployment, prefix_tokens) if prefix_tokens else 0
    whole = sequence_bytes_per_gpu(deployment, prefix_tokens + suffix_tokens + output_tokens)
    prefixes = seqs if distinct_prefixes is None else distinct_prefixes
    return prefixes * prefix + seqs * (whole - prefix) > kv_capacity_per_gpu(deployment)


# ---- the plan ---------------------------------------------------------------------------------


def plan(request: PlanRequest) -> PlanResult:
    """Demand vs. capacity at the requested concurrency and context, and what to do about it."""
    deployment = request.deployment
    validate_deployment(deployment)
    _validate_workload(request.concurrency, request.context_tokens, request.reuse_ratio)
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


def validate_deployment(deployment: Deployment) -> None:
    _dtype(deployment.kv_dtype, KV_DTYPE_BYTES, "kv_dtype")
    if deployment.weight_dtype is not None:
        _dtype(deployment.weight_dtype, WEIGHT_DTYPE_BYTES, "weight_dtype")
    _check(deployment.gpus >= 1, "gpus", "must be at least 1")
    _check(
        0 < deployment.gpu_mem_gib <= MAX_GPU_MEM_GIB,
        "gpu_mem_gib",
        f"must be a positive number of GiB, at most {MAX_GPU_MEM_GIB:,}",
    )
    tp = deployment.tp
    _check(tp >= 1, "tensor_parallel_size", "must be at least 1")
    _check(tp <= deployment.gpus, "tensor_parallel_size", f"cannot exceed gpus ({deployment.gpus})")
    _check(
        deployment.gpus % tp == 0, "tensor_parallel_size", f"must divide gpus ({deployment.gpus})"
    )
    _check(
        0.0 <= deployment.reserved_fraction < 1.0,
        "reserved_fraction",
        "must be at least 0 and below 1",
    )
    _check(
        deployment.weight_bytes is None or deployment.weight_bytes >= 0,
        "weight_bytes",
        "cannot be negative",
    )
    kv_heads_per_gpu(deployment.model, tp)


def _validate_workload(concurrency: int, context_tokens: int, reuse_ratio: float) -> None:
    _check(concurrency >= 1, "concurrency", "must be at least 1")
    _check(context_tokens >= 1, "context_tokens", "must be at least 1 token")
    _check(0.0 <= reuse_ratio <= 1.0, "reuse_ratio", "must be between 0 and 1")


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
        _check(name in REQUEST_FIELDS, str(name), "unknown field")
    deployment = Deployment(
        model=_request_model(data),
        gpus=_required_int(data, "gpus", "", minimum=None),
        gpu_mem_gib=_number(data, "gpu_mem_gib", None),
        tensor_parallel_size=_optional_int(data, "tensor_parallel_size", "", minimum=None),
        kv_dtype=_dtype(data.get("kv_dtype", "bf16"), KV_DTYPE_BYTES, "kv_dtype"),
        weight_bytes=_optional_int(data, "weight_bytes", "", minimum=0),
        weight_dtype=_optional_dtype(data.get("weight_dtype")),
        reserved_fraction=_number(data, "reserved_fraction", DEFAULT_RESERVED_FRACTION),
    )
    request = PlanRequest(
        deployment=deployment,
        concurrency=_required_int(data, "concurrency", "", minimum=None),
        context_tokens=_required_int(data, "context_tokens", "", minimum=None),
        reuse_ratio=_number(data, "reuse_ratio", 0.0),
    )
    validate_deployment(deployment)
    _validate_workload(request.concurrency, request.context_tokens, request.reuse_ratio)
    return request


def _request_model(data: Mapping[str, Any]) -> ModelArch:
    has_model, has_config = data.get("model") is not None, data.get("config") is not None
    _check(has_model != has_config, "model", "give exactly one of model and config")
    if has_config:
        return model_from_config(data["config"])
    if isinstance(data["model"], str):
        return preset_model(data["model"])
    return model_from_fields(data["model"])


def _check(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise PlannerError(field, message)


def _dtype_bytes(kv_dtype: str) -> int:
    return KV_DTYPE_BYTES[_dtype(kv_dtype, KV_DTYPE_BYTES, "kv_dtype")]


def _dtype(value: Any, table: Mapping[str, Any], field: str) -> str:
    if not isinstance(value, str) or value.lower() not in table:
        raise PlannerError(field, f"unknown dtype {value!r}; one of {', '.join(table)}")
    return value.lower()


def _optional_dtype(value: Any) -> str | None:
    return None if value is None else _dtype(value, WEIGHT_DTYPE_BYTES, "weight_dtype")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _required_int(data: Mapping[str, Any], key: str, path: str, minimum: int | None = 1) -> int:
    value = _optional_int(data, key, path, minimum)
    if value is None:
        raise PlannerError(_join(path, key), "is required")
    return value


def _optional_int(
    data: Mapping[str, Any], key: str, path: str, minimum: int | None = 1
) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    # bool is an int in Python but never a count; 8.0 from a JSON client is accepted as 8.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlannerError(_join(path, key), f"must be a whole number, not {value!r}")
    if minimum is not None and value < minimum:
        raise PlannerError(_join(path, key), f"must be at least {minimum}")
    if abs(value) > MAX_COUNT:
        raise PlannerError(_join(path, key), "is too large to be real")
    return value


def _number(data: Mapping[str, Any], key: str, default: float | None) -> float:
    value = data.get(key, default)
    if value is None:
        raise PlannerError(key, "is required")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PlannerError(key, f"must be a number, not {value!r}")
    return float(value)
