"""What a server session needs beyond its `serve` template: the context length its model and
workload allow, the side services (LMCache's server, ...) started before the engine, and the
engine's own health and metrics endpoints (runners/engine.py).

No Django. Reads the host through the run's transport; every command is a filled template.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from documents.step import Step
from runners.adapters.cache_config import gpu_kv_cache_tokens
from runners.commands import HOSTCTL_ARGV, fill
from runners.engine import SideService, engine_of
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


def side_services(
    commands: dict[str, Any], values: dict[str, Any], arm_kind: str
) -> list[SideService]:
    """The side services this arm runs beside its engine (runners/engine.py), in start order:
    LMCache's multi-process server, Mooncake's master and metadata server, ...; an endpoint
    the engine serves itself (KVBM's metrics) is not among them."""
    return engine_of(commands).launched_for(arm_kind, values)


def service_dir(step_dir: str, service: SideService) -> str:
    return f"{step_dir}/{service.name}"


def side_service_healthy(
    transport: Transport, service: SideService, values: dict[str, Any]
) -> bool:
    """The service's health command exits 0 (a service without one is healthy once started)."""
    if service.health is None:
        return True
    return transport.run(fill(service.health, values), timeout=HEALTH_TIMEOUT_S).ok


def offload_server_step(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    """The arm's side services, each started and healthy, in order, before the engine starts
    (a metadata server before the store that registers with it); nothing to do for an engine
    or backend without any (vLLM's native offload lives inside vLLM)."""
    services = side_services(ctx.commands, ctx.values, step["arm_kind"])
    if not services:
        return StepProgress(True, log=f"{step['name']}: none needed\n")
    step_dir = remote_dir(ctx, step)
    index = detail.get("index", 0)
    service = services[index]
    run_dir = service_dir(step_dir, service)
    values = {**ctx.values, "run_dir": ctx.run_dir}
    if not detail.get("launched"):
        name = f"{ctx.token}-{Path(step_dir).name}-{service.name}"
        ctx.transport.launch_detached(run_dir, name, fill(service.start or [], values))
        recorded = {"launched": True, "run_dir": run_dir, "since": time.time(), "index": index}
        return StepProgress(False, recorded, log=f"{step['name']}: {service.name} launched\n")
    status = ctx.transport.status(run_dir)
    if status.finished or status.vanished:
        raise BenchmarkError(
            f"the side service {service.name} exited (exit {status.exit_code}): "
            f"{tail_of(ctx, run_dir)}",
            step=step["name"],
        )
    if side_service_healthy(ctx.transport, service, values):
        log = f"{step['name']}: {service.name} healthy\n"
        if index + 1 < len(services):
            return StepProgress(False, {"launched": False, "index": index + 1}, log=log)
        return StepProgress(True, log=log)
    if time.time() - detail["since"] > ctx.serve_timeout_s:
        raise BenchmarkError(
            f"the side service {service.name} was not healthy within {ctx.serve_timeout_s:.0f} s",
            step=step["name"],
        )
    return StepProgress(False)


def stop_side_services(ctx: StepContext, step: Step) -> None:
    """Stop the session's side services, last started first."""
    step_dir = remote_dir(ctx, {**step, "kind": "offload_server"})
    for service in reversed(side_services(ctx.commands, ctx.values, step.get("arm_kind", ""))):
        ctx.transport.kill(service_dir(step_dir, service))


def cold_recovery_phases(
    workload: dict[str, Any], metrics: dict[str, Any], seed: int
) -> dict[str, Any] | None:
    """cold_recovery's flush size, from the GPU KV cache the server reports; None for any other
    dataset. (A server that does not say its cache size cannot be flushed: refused.)"""
    if workload.get("dataset") != "cold_recovery":
        return None
    tokens = gpu_kv_cache_tokens(metrics.get("cache_config"))
    if not tokens:
        raise BenchmarkError("cold_recovery: /metrics says no GPU KV cache size to flush")
    # A seed of its own: the flush prompts must share nothing with the sessions'.
    return {
        "flush_prompts": cold_recovery_flush_prompts(workload, int(tokens)),
        "flush_seed": (seed + 7_777_777) % 2**32,
    }


def engine_healthy(ctx: StepContext) -> bool:
    """The engine answers its health path (runners/engine.py) with 200."""
    path = engine_of(ctx.commands).health_path
    argv = fill(
        [*HOSTCTL_ARGV, "health", "{base_url}", path],
        {**ctx.values, "run_dir": ctx.run_dir, "base_url": ctx.base_url},
    )
    return ctx.transport.run(argv, timeout=30).ok


def engine_metrics_text(ctx: StepContext) -> str:
    """The engine's metrics page, read on the host through hostctl."""
    path = engine_of(ctx.commands).metrics_path
    argv = fill(
        [*HOSTCTL_ARGV, "metrics", "{base_url}", path],
        {**ctx.values, "run_dir": ctx.run_dir, "base_url": ctx.base_url},
    )
    result = ctx.transport.run(argv, timeout=30)
    if not result.ok:
        raise BenchmarkError(f"could not read the server's /metrics: {result.stderr[-300:]}")
    return result.stdout
