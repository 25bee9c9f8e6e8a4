"""What the engine predicts for a cold-recovery workload, without prompts or text: sessions of
`prefix` reused tokens plus a fresh `suffix`, warmed, pushed out of GPU memory, then resumed.

The planner's predicted band and simhost's own runs come from the same engine and the same
performance model (simhost.engine.perf), so they agree by construction. Pure; standard library.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from simhost.engine.batching import Engine, EngineConfig, EngineRequest
from simhost.engine.presets import ModelPreset

ARMS = ("resident", "offload", "recompute")


@dataclass(frozen=True)
class SessionWorkload:
    sessions: int
    prefix: int
    suffix: int
    output: int
    resumes: int = 2  # measured requests per session
    flush_ratio: float = 1.2  # eviction traffic, in GPU KV capacities
    order_seed: Optional[int] = None  # shuffle the resumes (as vllm bench does), or in order


@dataclass(frozen=True)
class ArmPrediction:
    ttft_p50: float
    output_throughput: float


def _request(
    tag: str, index: int, workload: SessionWorkload, session: int, output: int, block: int
) -> EngineRequest:
    # block hashes of the session's prefix are shared; the suffix's are the request's own
    blocks = (workload.prefix + workload.suffix) // block
    prefix_blocks = workload.prefix // block
    hashes = [hash(("prefix", session, b)) for b in range(prefix_blocks)]
    hashes += [hash((tag, index, b)) for b in range(prefix_blocks, blocks)]
    return EngineRequest(
        req_id="{}-{}".format(tag, index),
        prompt_hashes=hashes,
        prompt_len=workload.prefix + workload.suffix,
        max_tokens=output,
        salt=hash((tag, index)),
        arrival=0.0,
    )


def _phase(
    engine: Engine, requests: Sequence[EngineRequest], concurrency: int, start: float
) -> Tuple[List[float], int, float]:
    """Closed loop: (TTFTs, output tokens, end time)."""
    pending = list(reversed(requests))
    active: List[EngineRequest] = []
    first: Dict[str, float] = {}
    ttfts: List[float] = []
    tokens = 0
    now = start
    while pending or active:
        while pending and len(active) < concurrency:
            request = pending.pop()
            request.arrival = now
            engine.add(request)
            active.append(request)
        result = engine.step(now)
        if result.idle and result.duration == 0:
            raise RuntimeError("engine stalled")
        now += result.duration
        for request in result.emitted:
            if request.req_id not in first:
                first[request.req_id] = now
                ttfts.append(now - request.arrival)
        for request in result.finished:
            active.remove(request)
            tokens += request.generated
    return ttfts, tokens, now


def predict_arm(config: EngineConfig, workload: SessionWorkload, concurrency: int) -> ArmPrediction:
    engine = Engine(config)
    size = config.block_size
    warm = [_request("warm", s, workload, s, 1, size) for s in range(workload.sessions)]
    _, _, now = _phase(engine, warm, concurrency, 0.0)
    flush_tokens = workload.flush_ratio * config.num_gpu_blocks * config.block_size
    flush_count = int(flush_tokens // (workload.prefix + workload.suffix)) + 1
    flush = [_request("flush", i, workload, -1 - i, 1, size) for i in range(flush_count)]
    _, _, now = _phase(engine, flush, concurrency, now)
    order = [s for _ in range(workload.resumes) for s in range(workload.sessions)]
    if workload.order_seed is not None:
        random.Random(workload.order_seed).shuffle(order)  # noqa: S311 - not a secret
    measured = [_request("run", i, workload, s, workload.output, size) for i, s in enumerate(order)]
    ttfts, tokens, end = _phase(engine, measured, concurrency, now)
    ttfts.sort()
    middle = len(ttfts) // 2
    p50 = ttfts[middle] if len(ttfts) % 2 else (ttfts[middle - 1] + ttfts[middle]) / 2
    return ArmPrediction(ttft_p50=p50, output_throughput=tokens / (end - now))


def arm_config(
    preset: ModelPreset,
    arm: str,
    num_gpu_blocks: Optional[int] = None,
    offload_gib: float = 256.0,
    tier_bytes_per_s: Optional[float] = None,
) -> EngineConfig:
    return EngineConfig(
        preset=preset,
        num_gpu_blocks=num_gpu_blocks or preset.num_gpu_blocks,
        block_size=preset.block_size,
        max_num_batched_tokens=preset.max_num_batched_tokens,
        max_num_seqs=preset.max_num_seqs,
        enable_prefix_caching=arm != "recompute",
        kv_offloading_gib=offload_gib if arm == "offload" else None,
        offload_bytes_per_s=tier_bytes_per_s or float("inf"),
    )


def predict_arms(
    preset: ModelPreset,
    workload: SessionWorkload,
    concurrency: int,
    num_gpu_blocks: Optional[int] = None,
    tier_bytes_per_s: Optional[float] = None,
    offload_gib: float = 256.0,
) -> Dict[str, ArmPrediction]:
    return {
        arm: predict_arm(
            arm_config(preset, arm, num_gpu_blocks, offload_gib, tier_bytes_per_s),
            workload,
            concurrency,
        )
        for arm in ARMS
    }
