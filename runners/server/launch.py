"""What a server session needs beyond its `serve` template: the context length its model and
workload allow, and the offload tier's own server (LMCache's) started before vLLM.

No Django. Reads the host through the run's transport; every command is a filled template.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from documents.step import Step
from runners.commands import fill
from runners.errors import BenchmarkError, SpecError
from runners.stepcontext import StepContext, StepProgress, remote_dir, tail_of
from runners.transport import Transport
from runners.workloads import cold_recovery_flush_prompts, resolve_max_model_len

READ_TIMEOUT_S = 30
HEALTH_TIMEOUT_S = 30


def model_context_limit(transport: Transport, model_path: object) -> int | None:
    """The model's max_position_embeddings, from config.json beside its weights on the host;
    None for a hub id or a config without one (vLLM then checks the length itself)."""
    if not isinstance(model_path, str) or not model_path.startswith("/"):
        return None
    argv = fill(["cat", "{model_path}/config.json"], {"model_path": model_path})
    result = transport.run(argv, timeout=READ_TIMEOUT_S)
    if not result.ok:
        raise SpecError(
            f"cannot read the model's config.json on the host: {result.stderr.strip()[-200:]}",
            field="model_path",
        )
    try:
        config = json.loads(result.stdout)
    except ValueError:
        raise SpecError("the model's config.json is not JSON", field="model_path") from None
    return _max_positions(config)


def _max_positions(config: Any) -> int | None:
    # Multimodal configs keep the language model's limit under text_config.
    for holder in (config, config.get("text_config") if isinstance(config, dict) else None):
        value = holder.get("max_position_embeddings") if isinstance(holder, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def server_values(
    transport: Transport,
    commands: dict[str, Any],
    values: dict[str, Any],
    context_tokens: int | None,
) -> dict[str, Any]:
    """The run's values with `max_model_len` resolved for its servers; SpecError (before any
    server starts) when the workload cannot fit the model."""
    if not _uses_max_model_len(commands):
        return values
    limit = model_context_limit(transport, values.get("model_path"))
    configured = values.get("max_model_len")
    try:
        resolved = resolve_max_model_len(
            context_tokens, limit, int(configured) if configured is not None else None
        )
    except ValueError as problem:
        raise SpecError(str(problem), field="max_model_len") from None
    return {**values, "max_model_len": resolved}


def _uses_max_model_len(commands: dict[str, Any]) -> bool:
    return any("{max_model_len}" in token for t in commands["serve"].values() for token in t)


def offload_server(
    commands: dict[str, Any], values: dict[str, Any], arm_kind: str
) -> dict[str, Any] | None:
    """The offload tier's own server for this arm, if its backend has one: the profile's
    `offload_servers[offload_backend]`, a `start` and a `health` template (LMCache's
    multi-process server, which vLLM >= 0.25 expects for `--kv-offloading-backend lmcache`)."""
    if arm_kind != "offload":
        return None
    server: dict[str, Any] | None = commands.get("offload_servers", {}).get(
        values.get("offload_backend")
    )
    return server


def offload_server_healthy(
    transport: Transport, server: dict[str, Any], values: dict[str, Any]
) -> bool:
    """The offload server's health command exits 0."""
    return transport.run(fill(server["health"], values), timeout=HEALTH_TIMEOUT_S).ok


def offload_server_step(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    """The offload tier's own server (LMCache's), started and healthy before vLLM starts;
    nothing to do for a backend without one (native offload lives inside vLLM)."""
    server = offload_server(ctx.commands, ctx.values, step["arm_kind"])
    if server is None:
        return StepProgress(True, log=f"{step['name']}: none needed\n")
    run_dir = remote_dir(ctx, step)
    values = {**ctx.values, "run_dir": ctx.run_dir}
    if not detail.get("launched"):
        name = f"{ctx.token}-{Path(run_dir).name}"
        ctx.transport.launch_detached(run_dir, name, fill(server["start"], values))
        since = time.time()
        return StepProgress(False, {"launched": True, "run_dir": run_dir, "since": since})
    status = ctx.transport.status(run_dir)
    if status.finished or status.vanished:
        raise BenchmarkError(
            f"the offload server exited (exit {status.exit_code}): {tail_of(ctx, run_dir)}",
            step=step["name"],
        )
    if offload_server_healthy(ctx.transport, server, values):
        return StepProgress(True, log=f"{step['name']}: healthy\n")
    if time.time() - detail["since"] > ctx.serve_timeout_s:
        raise BenchmarkError(
            f"the offload server was not healthy within {ctx.serve_timeout_s:.0f} s",
            step=step["name"],
        )
    return StepProgress(False)


def cold_recovery_phases(
    workload: dict[str, Any], metrics: dict[str, Any], seed: int
) -> dict[str, Any] | None:
    """cold_recovery's flush size, from the GPU KV cache the server reports; None for any other
    dataset. (A server that does not say its cache size cannot be flushed: refused.)"""
    if workload.get("dataset") != "cold_recovery":
        return None
    config = metrics.get("cache_config") or {}
    tokens = config.get("kv_cache_size_tokens")
    if tokens is None and config.get("num_gpu_blocks") and config.get("block_size"):
        tokens = config["num_gpu_blocks"] * config["block_size"]
    if not tokens:
        raise BenchmarkError("cold_recovery: /metrics says no GPU KV cache size to flush")
    # A seed of its own: the flush prompts must share nothing with the sessions'.
    return {
        "flush_prompts": cold_recovery_flush_prompts(workload, int(tokens)),
        "flush_seed": (seed + 7_777_777) % 2**32,
    }
