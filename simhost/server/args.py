"""`simhost serve` flags (vLLM's spellings where they mean the same, plus emulation and fault
flags) and their translation into ServeSettings, refusing bad combinations with one line.

Pure argument handling; imports argparse and simhost's pure modules, never aiohttp.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from simhost.engine.batching import GIB, EngineConfig
from simhost.engine.presets import (
    DEFAULT_MODEL_PRESET,
    MODEL_PRESETS,
    ModelPreset,
    gpu_for_host_model,
)
from simhost.host.config import HostConfig
from simhost.host.statefile import state_dir
from simhost.scenarios import SCENARIOS
from simhost.server.faults import (
    FaultConfig,
    FaultConfigError,
    build_fault_config,
    parse_fault_text,
)
from simhost.server.kvbm import KvbmError, kvbm_values


class UsageError(ValueError):
    """A flag value or combination that cannot be served; the message names the flag."""


@dataclass(frozen=True)
class ServeSettings:
    host: str
    port: int
    served_model_names: List[str]
    engine: EngineConfig
    time_scale: float
    faults: FaultConfig
    host_config: HostConfig
    gpu_memory_utilization: float
    state_dir: str
    load_time_s: float
    num_gpu_blocks_override: Optional[int]
    virtual_clock: bool = True
    speed: float = 1.0  # this run's seeded speed factor (--noise-cv)
    personality: str = "vllm"  # whose names the server answers in: vllm, or sglang (launch_server)
    kvbm_metrics_port: Optional[int] = None  # Dynamo KVBM's own /metrics (simhost/server/kvbm.py)


FAULT_FLAGS = (
    ("crash_after_requests", int, "exit with status 70 once N requests have finished"),
    ("crash_after_seconds", float, "exit with status 70 after T wall seconds"),
    ("error_rate", float, "answer this fraction of generation requests with HTTP 500"),
    ("latency_drift_pct_per_hour", float, "slow every engine step by this %% per hour"),
    ("memory_growth_mib_per_hour", float, "grow reported process RSS and GPU memory (MiB/h)"),
    ("hang_after_requests", int, "after N answered generation requests, accept but never answer"),
    ("hang_after_seconds", float, "after T wall seconds, accept but never answer"),
    ("wrong_output_rate", float, "with offload on, corrupt greedy output of this fraction"),
    ("seed", int, "seed of the fault draws (default 0)"),
)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="model name to report (vLLM's positional)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", nargs="+", metavar="NAME")
    parser.add_argument(
        "--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True
    )
    parser.add_argument("--kv-offloading-size", type=float, metavar="GIB")
    parser.add_argument("--kv-offloading-backend", choices=["native", "lmcache"], default="native")
    parser.add_argument(
        "--kv-transfer-config",
        type=_transfer_config,
        metavar="JSON",
        help="a KV connector whose tier is the emulated one: " + ", ".join(OFFLOAD_CONNECTORS),
    )
    parser.add_argument("--num-gpu-blocks-override", type=int, metavar="N")
    parser.add_argument("--block-size", type=int, choices=[8, 16, 32, 64, 128])
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    _add_emulation_arguments(parser)
    _add_fault_arguments(parser)


# The connectors whose tier a side service holds (its size is the service's); simhost emulates the
# tier inside the engine, sized as the host's whole offload tier.
OFFLOAD_CONNECTORS = ("LMCacheMPConnector", "MooncakeStoreConnector", "DynamoConnector")


def _transfer_config(text: str) -> Dict[str, Any]:
    try:
        config = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError("not JSON: {}".format(error)) from None
    if not isinstance(config, dict) or config.get("kv_connector") not in OFFLOAD_CONNECTORS:
        raise argparse.ArgumentTypeError(
            "kv_connector must be one of {}".format(", ".join(OFFLOAD_CONNECTORS))
        )
    return config


def _add_emulation_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("emulation (simhost only)")
    group.add_argument("--scenario", choices=sorted(SCENARIOS), help="defaults from a scenario")
    group.add_argument("--model-preset", choices=sorted(MODEL_PRESETS))
    group.add_argument("--time-scale", type=float, help="wall seconds per emulated second")
    group.add_argument(
        "--clock",
        choices=["virtual", "wall"],
        help="report timings off the virtual clock (default) or let the client time them",
    )
    group.add_argument("--noise-cv", type=float, help="run-to-run speed spread (default 0)")
    group.add_argument("--noise-seed", type=int, help="seed of this run's speed (default: random)")
    group.add_argument("--kv-bytes-per-token", type=int)
    group.add_argument("--prefill-tokens-per-s", type=float)
    group.add_argument("--decode-step-ms", type=float, help="fixed cost of one engine step")
    group.add_argument("--decode-per-seq-ms", type=float, help="step cost per running sequence")
    group.add_argument("--offload-bandwidth-gib-s", type=float, help="default: the host's tier")
    group.add_argument("--load-time-s", type=float, default=0.0, help="wait before listening")
    group.add_argument("--state-dir", help="live GPU state for smi (default $SIMHOST_STATE_DIR)")


def _add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fault injection (simhost only)")
    group.add_argument("--fault-file", metavar="PATH", help="JSON object of the fields below")
    for name, kind, text in FAULT_FLAGS:
        flag = "--fault-" + name.replace("_", "-")
        metavar = "N" if kind is int else "X"
        group.add_argument(flag, dest="fault_" + name, type=kind, metavar=metavar, help=text)
    group.add_argument("--fault-clock", choices=["wall", "emulated"], dest="fault_clock")


def _with_scenario(args: argparse.Namespace) -> Dict[str, Any]:
    values = dict(vars(args))
    if args.scenario:
        for dest, value in SCENARIOS[args.scenario].serve.items():
            if values.get(dest) is None:
                values[dest] = value
    return values


def _preset(values: Mapping[str, Any], host: HostConfig) -> ModelPreset:
    """The model preset on the host's GPUs, with the emulation flags applied."""
    preset = MODEL_PRESETS[values.get("model_preset") or DEFAULT_MODEL_PRESET]
    preset = preset.on_gpu(gpu_for_host_model(host.gpu_model))
    overrides = {
        "kv_bytes_per_token": values.get("kv_bytes_per_token"),
        "prefill_tokens_per_s": values.get("prefill_tokens_per_s"),
        "max_model_len": values.get("max_model_len"),
        "decode_base_s": _ms(values.get("decode_step_ms")),
        "decode_per_seq_s": _ms(values.get("decode_per_seq_ms")),
    }
    for name, value in overrides.items():
        if value is not None and value <= 0:
            raise UsageError("--{}: must be > 0".format(name.replace("_", "-")))
    shape, platform = preset.shape, preset.platform
    if overrides["kv_bytes_per_token"] is not None:
        elements = 2 * shape.layers * shape.kv_heads * shape.head_dim
        shape = replace(shape, kv_bytes_per_element=overrides["kv_bytes_per_token"] / elements)
    if overrides["prefill_tokens_per_s"] is not None:
        # the compute share at which a short prompt's matmuls run at the given rate
        needed = overrides["prefill_tokens_per_s"] * 2 * shape.active_params
        platform = replace(
            platform, compute_efficiency=needed / (platform.gpu.bf16_flops * platform.gpus)
        )
    platform = replace(
        platform,
        step_overhead_s=_given(overrides, "decode_base_s", platform.step_overhead_s),
        per_seq_overhead_s=_given(overrides, "decode_per_seq_s", platform.per_seq_overhead_s),
    )
    return replace(
        preset,
        shape=shape,
        platform=platform,
        max_model_len=_given(overrides, "max_model_len", preset.max_model_len),
    )


def _ms(value: Optional[float]) -> Optional[float]:
    return None if value is None else value / 1000.0


def _offload(values: Mapping[str, Any], host: HostConfig) -> Tuple[Optional[float], float]:
    """(size GiB or None, bandwidth bytes/s), checked against the emulated host's tier."""
    size = values.get("kv_offloading_size")
    tier = host.offload_tier
    if values.get("kv_transfer_config") and size is None:
        if not tier.present or tier.capacity_gib is None:
            raise UsageError(
                "--kv-transfer-config: the emulated host {} has no sized offload tier".format(
                    host.name
                )
            )
        size = tier.capacity_gib
    bandwidth = _given(values, "offload_bandwidth_gib_s", tier.bandwidth_gib_s or 50.0)
    if bandwidth <= 0:
        raise UsageError("--offload-bandwidth-gib-s: must be > 0")
    if size is None:
        return None, bandwidth * GIB
    if size <= 0:
        raise UsageError("--kv-offloading-size: must be > 0 GiB")
    if not tier.present:
        raise UsageError(
            "--kv-offloading-size: the emulated host {} has no offload tier".format(host.name)
        )
    if tier.capacity_gib is not None and size > tier.capacity_gib:
        raise UsageError(
            "--kv-offloading-size: {} GiB exceeds the host's {} GiB tier".format(
                size, tier.capacity_gib
            )
        )
    return size, bandwidth * GIB


def _given(values: Mapping[str, Any], name: str, default: Any) -> Any:
    """The flag's value when given (even 0, so it can be refused), else the default."""
    value = values.get(name)
    return default if value is None else value


def engine_config(values: Mapping[str, Any], host: HostConfig) -> EngineConfig:
    preset = _preset(values, host)
    size, bandwidth = _offload(values, host)
    config = EngineConfig(
        preset=preset,
        num_gpu_blocks=_given(values, "num_gpu_blocks_override", preset.num_gpu_blocks),
        block_size=_given(values, "block_size", preset.block_size),
        max_num_batched_tokens=_given(
            values, "max_num_batched_tokens", preset.max_num_batched_tokens
        ),
        max_num_seqs=_given(values, "max_num_seqs", preset.max_num_seqs),
        enable_prefix_caching=bool(values.get("enable_prefix_caching")),
        kv_offloading_gib=size,
        offload_bytes_per_s=bandwidth,
        kv_offloading_backend=values.get("kv_offloading_backend") or "native",
        kv_connector=(values.get("kv_transfer_config") or {}).get("kv_connector"),
    )
    _check_engine(config)
    return config


def _check_engine(config: EngineConfig) -> None:
    for flag, value in (
        ("--num-gpu-blocks-override", config.num_gpu_blocks),
        ("--max-num-batched-tokens", config.max_num_batched_tokens),
        ("--max-num-seqs", config.max_num_seqs),
    ):
        if value <= 0:
            raise UsageError("{}: must be > 0".format(flag))
    capacity = config.num_gpu_blocks * config.block_size
    if config.preset.max_model_len > capacity:
        raise UsageError(
            "--max-model-len: the model's max seq len ({}) is larger than the maximum number of "
            "tokens that can be stored in KV cache ({}); lower --max-model-len or raise "
            "--num-gpu-blocks-override".format(config.preset.max_model_len, capacity)
        )


def fault_config(values: Mapping[str, Any], read_file: Callable[[str], str]) -> FaultConfig:
    from_file: Dict[str, Any] = {}
    try:
        if values.get("fault_file"):
            from_file = parse_fault_text(read_file(values["fault_file"]), values["fault_file"])
        flags = {name: values.get("fault_" + name) for name, _, _ in FAULT_FLAGS}
        flags["clock"] = values.get("fault_clock")
        return build_fault_config(from_file, flags)
    except FaultConfigError as error:
        raise UsageError("fault {}".format(error)) from None
    except OSError as error:
        raise UsageError(
            "--fault-file: cannot read {} ({})".format(values["fault_file"], error.strerror)
        ) from None


def serve_settings(
    args: argparse.Namespace,
    host: HostConfig,
    environ: Mapping[str, str],
    read_file: Callable[[str], str],
) -> ServeSettings:
    """Everything `serve` needs, validated; raises UsageError naming the flag."""
    values = _with_scenario(args)
    try:
        kvbm_port = kvbm_values(values, environ)
    except KvbmError as error:
        raise UsageError(str(error)) from None
    config = engine_config(values, host)
    time_scale = _given(values, "time_scale", 1.0)
    if time_scale <= 0 or not 0 < args.gpu_memory_utilization <= 1:
        raise UsageError("--time-scale must be > 0 and --gpu-memory-utilization in (0, 1]")
    if not 0 < args.port < 65536:
        raise UsageError("--port: must be from 1 to 65535")
    names = args.served_model_name or [args.model or config.preset.served_model_name]
    return ServeSettings(
        host=args.host,
        port=args.port,
        served_model_names=names,
        engine=config,
        time_scale=time_scale,
        faults=fault_config(values, read_file),
        host_config=host,
        gpu_memory_utilization=args.gpu_memory_utilization,
        state_dir=args.state_dir or state_dir(environ, args.host_config),
        load_time_s=max(0.0, args.load_time_s),
        num_gpu_blocks_override=values.get("num_gpu_blocks_override"),
        virtual_clock=(values.get("clock") or "virtual") == "virtual",
        speed=run_speed(_given(values, "noise_cv", 0.0), values.get("noise_seed")),
        personality=values.get("personality") or "vllm",
        kvbm_metrics_port=kvbm_port,
    )


def run_speed(cv: float, seed: Optional[int]) -> float:
    """A lognormal speed factor of mean 1 and coefficient of variation `cv`: every step of this
    server is that much slower or faster, as one real run differs from the next."""
    if not 0 <= cv < 1:
        raise UsageError("--noise-cv: must be in [0, 1)")
    sigma = math.sqrt(math.log(1 + cv * cv))
    rng = random.Random(seed)  # noqa: S311 - run-to-run noise, not a secret
    return math.exp(rng.gauss(-sigma * sigma / 2, sigma)) if cv else 1.0
