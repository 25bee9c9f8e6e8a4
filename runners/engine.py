"""What a serving engine exposes, read from its profile: the one interface through which runners/
learns an engine's endpoints, the adapters that read its output, its version probe and the side
services (an offload tier's own servers) that run beside each arm.

A profile's `commands.engine` section is data (docs/hosts.md, "Engines"); a profile without one
is a vLLM profile, so the profiles written before engines were data keep working unchanged.
Pure: no I/O, no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runners.errors import SpecError

ARM_KINDS = ("resident", "offload", "recompute")
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~/-]*$")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")

# What a vLLM server exposes: the defaults every field falls back to.
VLLM_DEFAULTS: dict[str, Any] = {
    "name": "vllm",
    "health_path": "/health",
    "metrics_path": "/metrics",
    "metrics_tool": "vllm-metrics",
    "bench_tool": "vllm-bench",
    "version_probe": "vllm_version",
    "kv_cache_size": "metrics",
}


@dataclass(frozen=True)
class SideService:
    """A process an arm needs beside the engine (LMCache's server, Mooncake's master and its
    metadata server, ...): started in order before the engine, health-checked, stopped with it.

    `when` holds value conditions (offload_backend must be "lmcache"); `metrics`, when given,
    is a command printing the service's own counters, read with `metrics_tool`. Without `start`
    it is an endpoint the engine's own process serves (Dynamo KVBM's metrics port inside vLLM):
    nothing is launched, health-checked or stopped for it; its counters are read as any
    side service's."""

    name: str
    arms: tuple[str, ...]
    start: list[str] | None
    health: list[str] | None = None
    metrics: list[str] | None = None
    metrics_tool: str | None = None
    when: Mapping[str, str] = field(default_factory=dict)

    def runs_with(self, arm_kind: str, values: Mapping[str, Any]) -> bool:
        return arm_kind in self.arms and all(
            str(values.get(name)) == want for name, want in self.when.items()
        )


@dataclass(frozen=True)
class Engine:
    """An engine's endpoints and output formats; see VLLM_DEFAULTS for what each field holds.

    `kv_cache_size` says where the GPU KV cache size (cold_recovery's flush) comes from: the
    metrics adapter's `cache_config` ("metrics"), or nowhere ("unknown": the flush is refused)."""

    name: str
    health_path: str
    metrics_path: str
    metrics_tool: str
    bench_tool: str
    version_probe: str | None
    kv_cache_size: str
    side_services: tuple[SideService, ...] = ()
    hit_proof: Mapping[str, Any] = field(default_factory=dict)

    @property
    def hit_proof_service(self) -> str | None:
        """The side service whose own lookup counters prove the offload tier's hits
        (`hit_proof.side_service`); None: the engine's external hit rate proves them."""
        name = self.hit_proof.get("side_service")
        return name if isinstance(name, str) else None

    def services_for(self, arm_kind: str, values: Mapping[str, Any]) -> list[SideService]:
        """The side services this arm runs (an engine's own endpoint among them), in order."""
        return [service for service in self.side_services if service.runs_with(arm_kind, values)]

    def launched_for(self, arm_kind: str, values: Mapping[str, Any]) -> list[SideService]:
        """This arm's side services that are processes of their own, in start order."""
        return [service for service in self.services_for(arm_kind, values) if service.start]

    def metered_for(self, arm_kind: str, values: Mapping[str, Any]) -> list[SideService]:
        """This arm's side services whose own counters are read around a bench (a `metrics`
        command and its adapter), in start order."""
        services = self.services_for(arm_kind, values)
        return [service for service in services if service.metrics and service.metrics_tool]


def engine_of(commands: Mapping[str, Any]) -> Engine:
    """The profile's engine; SpecError naming the field when its section is malformed."""
    section = commands.get("engine") or {}
    if not isinstance(section, Mapping):
        raise SpecError("must be an object", field="engine")
    merged = {**VLLM_DEFAULTS, **section}
    for key in ("health_path", "metrics_path"):
        if not isinstance(merged[key], str) or not _URL_PATH.fullmatch(merged[key]):
            raise SpecError("must be a URL path starting with /", field=f"engine.{key}")
    for key in ("name", "metrics_tool", "bench_tool"):
        if not isinstance(merged[key], str) or not merged[key]:
            raise SpecError("must be a non-empty string", field=f"engine.{key}")
    if merged["kv_cache_size"] not in ("metrics", "unknown"):
        raise SpecError("must be metrics or unknown", field="engine.kv_cache_size")
    services = [
        _service(item, f"engine.side_services[{index}]")
        for index, item in enumerate(section.get("side_services") or [])
    ]
    side = (*services, *_legacy_offload_servers(commands))
    hit_proof = merged.get("hit_proof") or {}
    if not isinstance(hit_proof, Mapping):
        raise SpecError("must be an object", field="engine.hit_proof")
    _check_hit_proof_service(hit_proof.get("side_service"), side)
    return Engine(
        name=merged["name"],
        health_path=merged["health_path"],
        metrics_path=merged["metrics_path"],
        metrics_tool=merged["metrics_tool"],
        bench_tool=merged["bench_tool"],
        version_probe=merged.get("version_probe"),
        kv_cache_size=merged["kv_cache_size"],
        side_services=side,
        hit_proof=dict(hit_proof),
    )


def _check_hit_proof_service(name: Any, services: tuple[SideService, ...]) -> None:
    # Only a service whose counters are read can prove a hit.
    if name is None:
        return
    readable = [service.name for service in services if service.metrics and service.metrics_tool]
    if name not in readable:
        raise SpecError(
            "must name a side service with metrics and a metrics_tool",
            field="engine.hit_proof.side_service",
        )


def _service(item: Any, where: str) -> SideService:
    if not isinstance(item, Mapping):
        raise SpecError("must be an object", field=where)
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SpecError("name must be lower-case letters, digits, _ or -", field=f"{where}.name")
    arms = tuple(item.get("arms") or ("offload",))
    if any(arm not in ARM_KINDS for arm in arms):
        raise SpecError(f"arms must be among {', '.join(ARM_KINDS)}", field=f"{where}.arms")
    for key in ("start", "health", "metrics"):
        value = item.get(key)
        if value is not None and not _is_template(value):
            raise SpecError("must be a non-empty list of strings", field=f"{where}.{key}")
    # Only an engine's own endpoint goes without a start: it has counters and no health check.
    if item.get("start") is None and (not item.get("metrics") or item.get("health")):
        raise SpecError(
            "a service without a start is the engine's own metrics endpoint: metrics, no health",
            field=f"{where}.start",
        )
    tool = item.get("metrics_tool")
    if item.get("metrics") and (not isinstance(tool, str) or not tool):
        raise SpecError(
            "a service with metrics must name its adapter", field=f"{where}.metrics_tool"
        )
    when = item.get("when") or {}
    if not isinstance(when, Mapping) or not all(isinstance(v, str) for v in when.values()):
        raise SpecError("must map value names to strings", field=f"{where}.when")
    return SideService(
        name=name,
        arms=arms,
        start=list(item["start"]) if item.get("start") else None,
        health=list(item["health"]) if item.get("health") else None,
        metrics=list(item["metrics"]) if item.get("metrics") else None,
        metrics_tool=item.get("metrics_tool"),
        when=dict(when),
    )


def _legacy_offload_servers(commands: Mapping[str, Any]) -> list[SideService]:
    """`offload_servers[<backend>]` (one start/health pair per offload_backend), the form the
    vllm profile used before side services were a list: each is an offload-arm service that
    runs when offload_backend names it."""
    found = commands.get("offload_servers") or {}
    return [
        _service(
            {**server, "name": backend, "arms": ["offload"], "when": {"offload_backend": backend}},
            f"offload_servers.{backend}",
        )
        for backend, server in found.items()
    ]


def _is_template(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(token, str) for token in value)
    )
