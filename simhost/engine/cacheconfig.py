"""The labels of vllm:cache_config_info, as vLLM 0.32 writes them. Pure; standard library only."""

from __future__ import annotations

from typing import Dict

from simhost.engine.batching import Engine


def cache_config_labels(engine: Engine, gpu_memory_utilization: float) -> Dict[str, str]:
    """The labels vLLM 0.32 puts on vllm:cache_config_info (values are strings, None as 'None');
    the set a real 0.32 server exported, for a dense attention model."""
    config = engine.config
    capacity = config.num_gpu_blocks * config.block_size
    block = str(config.block_size)
    connector = config.kv_connector is not None
    native_offload = config.offload_enabled and not connector
    return {
        "_block_size_resolved": "True",
        "block_size": block,
        "cache_dtype": "auto",
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": block,
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": str(config.enable_prefix_caching),
        "engine": "0",
        "gpu_memory_utilization": str(gpu_memory_utilization),
        "hash_block_size": "None",
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": str(round(capacity / config.preset.max_model_len, 5)),
        "kv_cache_memory_bytes": str(capacity * config.preset.kv_bytes_per_token),
        "kv_cache_size_tokens": str(capacity),
        "kv_offloading_backend": config.kv_offloading_backend,
        "kv_offloading_size": "None" if connector else str(config.kv_offloading_gib),
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "float32",
        "num_cpu_blocks": str(config.num_cpu_blocks) if native_offload else "None",
        "num_gpu_blocks": str(config.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "0",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "sliding_window": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False",
    }
