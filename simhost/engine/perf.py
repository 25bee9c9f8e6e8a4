"""The performance model simhost's engine runs on and Tollgate's planner predicts with.

From first principles, per engine step: the FLOPs of the prefill chunks (the weights' matmuls
plus an attention term that grows with the context each chunk attends to) against the GPUs'
compute, and the bytes every step reads (the weights the batch touches, the KV of every
scheduled sequence) against HBM bandwidth; the step takes the longer of the two plus a fixed
overhead (a roofline). The host link of each GPU carries the tier's loads and stores on one
timeline (`HostLink`). Pure: no I/O, no clock; standard library only (simhost runs on 3.9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple


@dataclass(frozen=True)
class Gpu:
    """One accelerator's published figures (see `source`)."""

    name: str
    bf16_flops: float  # dense peak, FLOP/s
    hbm_bytes_per_s: float
    link_bytes_per_s: float  # host link, one direction, as DMA measures it
    link_duplex: float  # bidirectional / one-way throughput (1 = half duplex, 2 = full)
    source: str


@dataclass(frozen=True)
class ModelShape:
    """What the cost of a token depends on; the planner's ModelArch gives the same fields."""

    layers: int
    heads: int  # query heads
    kv_heads: int
    head_dim: int
    active_params: float  # per token (a MoE's routed share plus its dense part)
    total_params: float
    weight_bytes_per_param: float = 2.0
    kv_bytes_per_element: float = 2.0

    @property
    def kv_bytes_per_token(self) -> int:
        return int(2 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_element)


@dataclass(frozen=True)
class Platform:
    """A server: `gpus` GPUs in one tensor-parallel group, and how well the engine uses them."""

    gpu: Gpu
    gpus: int
    compute_efficiency: float = 0.4  # achieved share of peak FLOPs in prefill (MFU)
    memory_efficiency: float = 0.7  # achieved share of HBM bandwidth in decode
    step_overhead_s: float = 0.004  # launches, sampling, scheduling: paid by every step
    per_seq_overhead_s: float = 0.0  # host-side work per sequence in a step
    link_efficiency: float = 1.0  # share of the link the offload connector achieves

    @property
    def flops(self) -> float:
        return self.gpu.bf16_flops * self.gpus * self.compute_efficiency

    @property
    def hbm(self) -> float:
        return self.gpu.hbm_bytes_per_s * self.gpus * self.memory_efficiency


# A chunk of prefill: (new tokens, tokens already in the KV cache before them).
Chunk = Tuple[int, int]


def attention_pairs(tokens: int, before: int) -> float:
    """(query, key) pairs of a causal chunk: each new token sees the ones before it and itself."""
    return tokens * before + tokens * (tokens + 1) / 2


def prefill_flops(model: ModelShape, tokens: int, before: int) -> float:
    linear = 2.0 * model.active_params * tokens
    # QK^T and PV: two multiply-adds per pair, per head dimension, per query head, per layer
    attention = 4.0 * model.layers * model.heads * model.head_dim * attention_pairs(tokens, before)
    return linear + attention


def weight_bytes_read(model: ModelShape, batch_tokens: int) -> float:
    """Weights a step streams from HBM: a dense model all of them; a MoE the experts its tokens
    route to, each token touching an independent `active/total` share (1 token: the active
    parameters; many: all of them)."""
    share = model.active_params / model.total_params
    touched = 1.0 - (1.0 - share) ** max(1, batch_tokens)
    return model.total_params * touched * model.weight_bytes_per_param


def step_seconds(
    platform: Platform, model: ModelShape, chunks: Sequence[Chunk], decode_contexts: Sequence[int]
) -> float:
    """One engine step: prefill `chunks` and one token for each sequence in `decode_contexts`
    (its context length). The longer of compute and memory time, plus the step's overhead."""
    flops = sum(prefill_flops(model, tokens, before) for tokens, before in chunks)
    flops += sum(prefill_flops(model, 1, context) for context in decode_contexts)
    batch = sum(tokens for tokens, _ in chunks) + len(decode_contexts)
    kv_tokens = sum(tokens + before for tokens, before in chunks) + sum(decode_contexts)
    memory = weight_bytes_read(model, batch) + kv_tokens * model.kv_bytes_per_token
    seqs = len(chunks) + len(decode_contexts)
    overhead = platform.step_overhead_s + platform.per_seq_overhead_s * seqs
    return overhead + max(flops / platform.flops, memory / platform.hbm)


def prefill_seconds(
    platform: Platform, model: ModelShape, tokens: int, before: int, budget: int
) -> float:
    """A prompt's prefill alone on the server, in chunks of at most `budget` tokens."""
    total = 0.0
    done = 0
    while done < tokens:
        chunk = min(budget, tokens - done)
        total += step_seconds(platform, model, [(chunk, before + done)], [])
        done += chunk
    return total


class HostLink:
    """The host links of a server's GPUs, one timeline: under tensor parallelism every GPU moves
    its 1/gpus share of each transfer over its own link at the same time. Loads (host to GPU)
    and stores (GPU to host) share it: alone, a direction runs at the link's one-way speed; both
    together reach only `duplex` times that, so a store byte costs a load's (2 - duplex)/duplex
    (0 for a full-duplex link, 1 for a half-duplex one). Transfers are served in issue order."""

    def __init__(self, platform: Platform, cap_bytes_per_s: Optional[float] = None) -> None:
        gpu = platform.gpu
        self.bytes_per_s = gpu.link_bytes_per_s * platform.gpus * platform.link_efficiency
        if cap_bytes_per_s is not None:  # the host side (DRAM, NUMA, the tier) can be slower
            self.bytes_per_s = min(self.bytes_per_s, cap_bytes_per_s)
        self.store_weight = max(0.0, (2.0 - gpu.link_duplex) / gpu.link_duplex)
        self.free_at = 0.0

    def load(self, size: float, now: float) -> Tuple[float, float]:
        """Queue a load of `size` bytes (all GPUs together): (seconds on the link, done at)."""
        seconds = size / self.bytes_per_s
        self.free_at = max(now, self.free_at) + seconds
        return seconds, self.free_at

    def store(self, size: float, now: float) -> float:
        """Queue a store; returns its seconds on the link (the loads behind it wait that long)."""
        seconds = size / self.bytes_per_s
        self.free_at = max(now, self.free_at) + seconds * self.store_weight
        return seconds
