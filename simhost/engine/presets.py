"""Model presets for the emulated engine: KV size per token, prefill and decode speed, KV capacity.

Pure data; imports only the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPreset:
    """Speed and memory figures of one emulated model deployment (all GPUs of one server)."""

    name: str
    served_model_name: str
    kv_bytes_per_token: int  # summed over every layer and every TP rank
    prefill_tokens_per_s: float
    decode_base_s: float  # fixed cost of one engine step (kernel launches, sampling)
    decode_per_seq_s: float  # extra step cost per sequence in the batch
    kv_read_bytes_per_s: float  # effective HBM bandwidth for reading context KV in a step
    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    tensor_parallel_size: int
    weights_gib_per_gpu: float

    @property
    def gpu_kv_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


# A 480B-class MoE served TP8 (62 layers, 8 KV heads of 128, bf16 KV: 2*62*8*128*2 bytes/token).
LARGE_480B_TP8 = ModelPreset(
    name="sim-480b-tp8",
    served_model_name="sim-480b-tp8",
    kv_bytes_per_token=253_952,
    prefill_tokens_per_s=10_000.0,
    decode_base_s=0.025,
    decode_per_seq_s=0.0004,
    kv_read_bytes_per_s=2.0e13,
    num_gpu_blocks=196_608,
    block_size=16,
    max_model_len=262_144,
    max_num_batched_tokens=8192,
    max_num_seqs=256,
    tensor_parallel_size=8,
    weights_gib_per_gpu=60.0,
)

# A ~1B model on one GPU: fast, small KV; the default for tests.
SMALL_1B = ModelPreset(
    name="sim-1b",
    served_model_name="sim-1b",
    kv_bytes_per_token=32_768,
    prefill_tokens_per_s=60_000.0,
    decode_base_s=0.004,
    decode_per_seq_s=0.00005,
    kv_read_bytes_per_s=1.5e12,
    num_gpu_blocks=8192,
    block_size=16,
    max_model_len=32_768,
    max_num_batched_tokens=4096,
    max_num_seqs=256,
    tensor_parallel_size=1,
    weights_gib_per_gpu=2.5,
)

MODEL_PRESETS = {preset.name: preset for preset in (LARGE_480B_TP8, SMALL_1B)}
DEFAULT_MODEL_PRESET = SMALL_1B.name
