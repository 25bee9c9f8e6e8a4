"""KV capacity arithmetic of one deployment: KV bytes per token and per GPU, the VRAM left for
KV after weights and the reserve, demand, the fit boundary, and the G3 workload check.
Pure: imports no Django and does no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gates.planner.architectures import (
    KV_DTYPE_BYTES,
    WEIGHT_DTYPE_BYTES,
    ModelArch,
    PlannerError,
    check,
    parse_dtype,
)

GIB = 1024**3
# vLLM's default --gpu-memory-utilization is 0.9: it never plans with the last 10 % of VRAM.
DEFAULT_RESERVED_FRACTION = 0.10
MAX_GPU_MEM_GIB = 2**20


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
        check(tokens >= 0, name, "cannot be negative")
    validate_workload(concurrency, prefix_tokens + suffix_tokens + output_tokens, 0.0)
    check(distinct_prefixes is None or distinct_prefixes >= 1, "distinct_prefixes", "must be >= 1")
    seqs = sequences_per_replica(deployment, concurrency)
    prefix = sequence_bytes_per_gpu(deployment, prefix_tokens) if prefix_tokens else 0
    whole = sequence_bytes_per_gpu(deployment, prefix_tokens + suffix_tokens + output_tokens)
    prefixes = seqs if distinct_prefixes is None else distinct_prefixes
    return prefixes * prefix + seqs * (whole - prefix) > kv_capacity_per_gpu(deployment)


def validate_deployment(deployment: Deployment) -> None:
    parse_dtype(deployment.kv_dtype, KV_DTYPE_BYTES, "kv_dtype")
    if deployment.weight_dtype is not None:
        parse_dtype(deployment.weight_dtype, WEIGHT_DTYPE_BYTES, "weight_dtype")
    check(deployment.gpus >= 1, "gpus", "must be at least 1")
    check(
        0 < deployment.gpu_mem_gib <= MAX_GPU_MEM_GIB,
        "gpu_mem_gib",
        f"must be a positive number of GiB, at most {MAX_GPU_MEM_GIB:,}",
    )
    tp = deployment.tp
    check(tp >= 1, "tensor_parallel_size", "must be at least 1")
    check(tp <= deployment.gpus, "tensor_parallel_size", f"cannot exceed gpus ({deployment.gpus})")
    check(
        deployment.gpus % tp == 0, "tensor_parallel_size", f"must divide gpus ({deployment.gpus})"
    )
    check(
        0.0 <= deployment.reserved_fraction < 1.0,
        "reserved_fraction",
        "must be at least 0 and below 1",
    )
    check(
        deployment.weight_bytes is None or deployment.weight_bytes >= 0,
        "weight_bytes",
        "cannot be negative",
    )
    kv_heads_per_gpu(deployment.model, tp)


def validate_workload(concurrency: int, context_tokens: int, reuse_ratio: float) -> None:
    check(concurrency >= 1, "concurrency", "must be at least 1")
    check(context_tokens >= 1, "context_tokens", "must be at least 1 token")
    check(0.0 <= reuse_ratio <= 1.0, "reuse_ratio", "must be between 0 and 1")


def _dtype_bytes(kv_dtype: str) -> int:
    return KV_DTYPE_BYTES[parse_dtype(kv_dtype, KV_DTYPE_BYTES, "kv_dtype")]
