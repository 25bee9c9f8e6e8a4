"""The predicted TTFT-saving band of an offload tier, from the performance model simhost runs on
(simhost.engine.perf and simhost.engine.predict): the same engine, the same roofline, the same
shared host links, so the planner and simhost agree by construction.

The band spans what the model cannot know in advance: the share of the host links' DMA speed
the offload connector reaches (`LINK_EFFICIENCY_RANGE`) and the order sessions come back in.
Pure: no I/O, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gates.planner.architectures import ModelArch, PlannerError
from simhost.engine.perf import ModelShape, Platform
from simhost.engine.predict import SessionWorkload, predict_arms
from simhost.engine.presets import GPUS, ModelPreset

# The vLLM blog measured ~50 GB/s per H100 with DMA; connectors that copy with kernels or
# through a bounce buffer reach less (docs/simhost.md "Calibration").
LINK_EFFICIENCY_RANGE = (0.5, 1.0)
# ... and the order the sessions come back in (vllm bench shuffles its prompts by its seed)
ORDER_SEEDS = (None, 1, 2, 3)
BLOCK_SIZE = 16


@dataclass(frozen=True)
class SpeedRequest:
    model: ModelArch
    gpu: str  # a key of simhost.engine.presets.GPUS
    gpus: int
    kv_tokens: int  # the server's GPU KV capacity, in tokens
    workload: SessionWorkload
    concurrency: int
    tier_gib_s: float | None = None  # the host side's bandwidth cap, when known


@dataclass(frozen=True)
class TtftBand:
    """Offload vs resident TTFT p50 change (fractions, e.g. -0.3), low and high end, and the
    model's recompute/offload TTFT ratio and throughput change at the fast end."""

    ttft_change_low: float
    ttft_change_high: float
    throughput_change: float
    recompute_over_offload: float


def model_shape(model: ModelArch) -> ModelShape:
    if model.mla_latent_dim is not None or not model.parameters:
        raise PlannerError("model", "the speed model needs parameters and K/V heads (not MLA)")
    active = model.active_parameters or model.parameters
    return ModelShape(
        layers=model.layers,
        heads=model.heads or model.kv_heads,  # unknown query heads: the attention term is low
        kv_heads=model.kv_heads,
        head_dim=model.head_dim,
        active_params=float(active),
        total_params=float(model.parameters),
    )


def preset_for(request: SpeedRequest) -> ModelPreset:
    if request.gpu not in GPUS:
        raise PlannerError("gpu", f"unknown; one of {', '.join(sorted(GPUS))}")
    return ModelPreset(
        name=request.model.name,
        served_model_name=request.model.name,
        shape=model_shape(request.model),
        platform=Platform(gpu=GPUS[request.gpu], gpus=request.gpus, step_overhead_s=0.012),
        num_gpu_blocks=request.kv_tokens // BLOCK_SIZE,
        block_size=BLOCK_SIZE,
        max_model_len=request.kv_tokens,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        weights_gib_per_gpu=0.0,
    )


def ttft_band(request: SpeedRequest) -> TtftBand:
    preset = preset_for(request)
    cap = request.tier_gib_s * (1 << 30) if request.tier_gib_s else None
    changes = []
    fast: dict[str, float] = {}
    for efficiency, seed in [(e, s) for e in LINK_EFFICIENCY_RANGE for s in ORDER_SEEDS]:
        platform = replace(preset.platform, link_efficiency=efficiency)
        workload = replace(request.workload, order_seed=seed)
        arms = predict_arms(
            replace(preset, platform=platform), workload, request.concurrency, None, cap
        )
        resident, offload = arms["resident"], arms["offload"]
        changes.append(offload.ttft_p50 / resident.ttft_p50 - 1)
        fast = {
            "throughput": offload.output_throughput / resident.output_throughput - 1,
            "recompute": arms["recompute"].ttft_p50 / offload.ttft_p50,
        }
    return TtftBand(
        ttft_change_low=min(changes),
        ttft_change_high=max(changes),
        throughput_change=fast["throughput"],
        recompute_over_offload=fast["recompute"],
    )
