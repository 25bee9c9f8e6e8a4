"""GPUs, model shapes and model presets for the emulated engine, with the sources of their
figures (docs/simhost.md "Calibration" shows what they reproduce).

Pure data; imports only the standard library and simhost's performance model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict

from simhost.engine.perf import Gpu, ModelShape, Platform

# vLLM's KV offloading blog (vllm-project.github.io _posts/2026-01-08-kv-offloading-connector.md):
# about 50 GB/s one way and 83.4 GB/s both ways per H100 over PCIe 5 with DMA copies.
PCIE5_DMA_BYTES_PER_S = 50e9
PCIE5_DUPLEX = 83.4 / 50.0

GPUS: Dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu(
            name="H100-SXM5-80GB",
            bf16_flops=989e12,
            hbm_bytes_per_s=3.35e12,
            link_bytes_per_s=PCIE5_DMA_BYTES_PER_S,
            link_duplex=PCIE5_DUPLEX,
            source="NVIDIA H100 datasheet (SXM5: 989 TFLOPS dense BF16, 3.35 TB/s); link: vLLM "
            "blog",
        ),
        Gpu(
            name="H200-SXM-141GB",
            bf16_flops=989e12,
            hbm_bytes_per_s=4.8e12,
            link_bytes_per_s=PCIE5_DMA_BYTES_PER_S,
            link_duplex=PCIE5_DUPLEX,
            source="NVIDIA H200 datasheet (989 TFLOPS dense BF16, 4.8 TB/s); link: vLLM blog",
        ),
        Gpu(
            name="MI300X",
            bf16_flops=1307e12,
            hbm_bytes_per_s=5.3e12,
            link_bytes_per_s=PCIE5_DMA_BYTES_PER_S,
            link_duplex=PCIE5_DUPLEX,
            source="AMD MI300X datasheet (1307 TFLOPS dense BF16, 5.3 TB/s); PCIe 5 x16 link "
            "assumed to copy like the H100's (not measured on AMD)",
        ),
        Gpu(
            name="MI308X",
            bf16_flops=1307e12 * 80 / 304,
            hbm_bytes_per_s=5.3e12,
            link_bytes_per_s=PCIE5_DMA_BYTES_PER_S,
            link_duplex=PCIE5_DUPLEX,
            source="no datasheet: MI300X scaled to 80 of its 304 compute units, as press reports "
            "describe the export part; HBM as the MI300X. Fits the vendor report's ~7.9k tok/s "
            "32k prefill (docs/simhost.md)",
        ),
    )
}

# GPU model strings of the host configs (simhost.host.config) -> GPUS entries.
GPU_BY_HOST_MODEL = {"H100": "H100-SXM5-80GB", "H200": "H200-SXM-141GB", "MI308X": "MI308X"}
GPU_BY_HOST_MODEL["MI300X"] = "MI300X"


def gpu_for_host_model(model: str) -> Gpu:
    """The GPU a host config names ("NVIDIA H100 80GB HBM3" -> H100); the H100 when unknown."""
    for key in sorted(GPU_BY_HOST_MODEL, key=len, reverse=True):
        if key in model.upper().replace(" ", ""):
            return GPUS[GPU_BY_HOST_MODEL[key]]
    return GPUS["H100-SXM5-80GB"]


@dataclass(frozen=True)
class ModelPreset:
    """One emulated model deployment (all GPUs of one server): its shape, its platform and the
    KV cache and scheduler limits vLLM would start with."""

    name: str
    served_model_name: str
    shape: ModelShape
    platform: Platform
    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    weights_gib_per_gpu: float

    @property
    def tensor_parallel_size(self) -> int:
        return self.platform.gpus

    @property
    def kv_bytes_per_token(self) -> int:  # summed over every layer and every TP rank
        return self.shape.kv_bytes_per_token

    @property
    def gpu_kv_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    def on_gpu(self, gpu: Gpu) -> "ModelPreset":
        return replace(self, platform=replace(self.platform, gpu=gpu))


# Qwen3-Coder-480B-A35B (its config.json: 62 layers, 96 query heads, 8 KV heads of 128; 35B of
# 480B parameters active per token), bf16 KV: 2*62*8*128*2 = 253,952 bytes/token, TP8.
QWEN3_CODER_480B = ModelShape(
    layers=62, heads=96, kv_heads=8, head_dim=128, active_params=35e9, total_params=480e9
)
# A Llama-3.2-1B-like dense model (16 layers, 32 heads, 8 KV heads of 64): 32,768 bytes/token.
DENSE_1B = ModelShape(
    layers=16, heads=32, kv_heads=8, head_dim=64, active_params=1.24e9, total_params=1.24e9
)

LARGE_480B_TP8 = ModelPreset(
    name="sim-480b-tp8",
    served_model_name="sim-480b-tp8",
    shape=QWEN3_CODER_480B,
    platform=Platform(
        gpu=GPUS["H100-SXM5-80GB"], gpus=8, step_overhead_s=0.012, per_seq_overhead_s=0.0002
    ),
    num_gpu_blocks=196_608,
    block_size=16,
    max_model_len=262_144,
    max_num_batched_tokens=8192,
    max_num_seqs=256,
    weights_gib_per_gpu=60.0,
)

# A ~1B model on one GPU: fast, small KV; the default for tests.
SMALL_1B = ModelPreset(
    name="sim-1b",
    served_model_name="sim-1b",
    shape=DENSE_1B,
    platform=Platform(
        gpu=GPUS["H100-SXM5-80GB"], gpus=1, step_overhead_s=0.004, per_seq_overhead_s=0.00005
    ),
    num_gpu_blocks=8192,
    block_size=16,
    max_model_len=32_768,
    max_num_batched_tokens=4096,
    max_num_seqs=256,
    weights_gib_per_gpu=2.5,
)

MODEL_PRESETS = {preset.name: preset for preset in (LARGE_480B_TP8, SMALL_1B)}
DEFAULT_MODEL_PRESET = SMALL_1B.name
