"""The emulated HOST: GPU inventory, driver and toolkit versions, vLLM version, offload tier.

Owns the host config JSON format, the named presets and the lookup order
(--host-config PATH, --host-preset NAME, $SIMHOST_HOST_CONFIG, built-in default).
Reads one file at most; imports only the standard library and the presets (simhost.host.presets).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar, overload

from simhost.host.presets import DEFAULT_HOST_PRESET as DEFAULT_HOST_PRESET
from simhost.host.presets import HOST_PRESETS as HOST_PRESETS

ENV_HOST_CONFIG = "SIMHOST_HOST_CONFIG"


class HostConfigError(ValueError):
    """A host config that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class OffloadTier:
    present: bool
    kind: Optional[str]
    capacity_gib: Optional[float]
    bandwidth_gib_s: Optional[float]


@dataclass(frozen=True)
class ForeignProcess:
    """A process of someone else's holding a GPU: what a shared or dirty host looks like."""

    gpu: int
    pid: int
    name: str
    used_memory_mib: int


@dataclass(frozen=True)
class HeldMemory:
    """GPU memory in use with no process nvidia-smi can name (a job in another container)."""

    gpu: int
    used_memory_mib: int


@dataclass(frozen=True)
class XidEvent:
    """An NVIDIA XID line `simhost dmesg` prints, `seconds_ago` before each read of the log."""

    gpu: int
    code: int
    message: str = "GPU has fallen off the bus."
    seconds_ago: float = 0.0


@dataclass(frozen=True)
class AmdgpuEvent:
    """An amdgpu fault line `simhost dmesg` prints on an AMD host (kinds: AMDGPU_EVENT_KINDS)."""

    gpu: int
    kind: str
    seconds_ago: float = 0.0


@dataclass(frozen=True)
class GpuHealth:
    """Fault knobs for the smi output: foreign processes, memory held without a visible
    process, active clock-throttle reasons (nvidia-smi's names without the prefix, e.g.
    "hw_slowdown", which amd-smi shows as its nearest violation; or amd-smi's own violation
    names on an AMD host), uncorrectable ECC; and XID (NVIDIA) or amdgpu (AMD) kernel-log lines."""

    foreign_processes: Tuple[ForeignProcess, ...] = ()
    throttle_reasons: Tuple[str, ...] = ()
    ecc_uncorrectable: int = 0
    held_memory: Tuple[HeldMemory, ...] = ()
    xid_events: Tuple[XidEvent, ...] = ()
    amdgpu_events: Tuple[AmdgpuEvent, ...] = ()


THROTTLE_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "display_clocks_setting",
)
# amd-smi metric's `throttle` violations (ROCm 6.3 names, without "_violation_status").
AMD_VIOLATIONS = ("prochot", "ppt", "socket_thermal", "vr_thermal", "hbm_thermal")
AMDGPU_EVENT_KINDS = (
    "ras_uncorrectable",
    "ras_deferred",
    "ras_poison",
    "ras_fatal",
    "bad_pages",
    "reset_failed",
    "gpu_reset",
    "ring_timeout",
    "page_fault",
)


@dataclass(frozen=True)
class HostConfig:
    name: str
    hostname: str
    gpu_vendor: str  # "nvidia" or "amd"
    gpu_model: str
    gpu_count: int
    gpu_memory_mib: int
    driver_version: str
    cuda_version: Optional[str]
    rocm_version: Optional[str]
    vllm_version: str
    host_memory_gib: float
    offload_tier: OffloadTier
    gpu_health: GpuHealth = field(default_factory=GpuHealth)


def _merge(base: Dict[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


T = TypeVar("T")


@overload
def _field(data: Mapping[str, Any], path: str, kind: Type[T], source: str) -> T: ...
@overload
def _field(
    data: Mapping[str, Any], path: str, kind: Type[T], source: str, optional: bool
) -> Optional[T]: ...
def _field(
    data: Mapping[str, Any], path: str, kind: Type[T], source: str, optional: bool = False
) -> Optional[T]:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise HostConfigError("{}: missing field {}".format(source, path))
        value = value[part]
    if value is None and optional:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise HostConfigError(
            "{}: field {} must be {}, got {!r}".format(source, path, kind.__name__, value)
        )
    return value


def _tier(data: Mapping[str, Any], source: str) -> OffloadTier:
    present = _field(data, "offload_tier.present", bool, source)
    tier = OffloadTier(
        present=present,
        kind=_field(data, "offload_tier.kind", str, source, optional=not present),
        capacity_gib=_field(data, "offload_tier.capacity_gib", float, source, not present),
        bandwidth_gib_s=_field(data, "offload_tier.bandwidth_gib_s", float, source, not present),
    )
    for name in ("capacity_gib", "bandwidth_gib_s"):
        value = getattr(tier, name)
        if value is not None and value <= 0:
            raise HostConfigError("{}: field offload_tier.{} must be > 0".format(source, name))
    return tier


def _health(data: Any, source: str) -> GpuHealth:
    if not isinstance(data, Mapping):
        raise HostConfigError("{}: field gpu_health must be an object".format(source))
    processes: List[ForeignProcess] = []
    for i, item in enumerate(data.get("foreign_processes") or []):
        where = "gpu_health.foreign_processes[{}]".format(i)
        if not isinstance(item, Mapping):
            raise HostConfigError("{}: field {} must be an object".format(source, where))
        processes.append(
            ForeignProcess(
                gpu=_field(item, "gpu", int, "{} {}".format(source, where)),
                pid=_field(item, "pid", int, "{} {}".format(source, where)),
                name=_field(item, "name", str, "{} {}".format(source, where)),
                used_memory_mib=_field(item, "used_memory_mib", int, "{} {}".format(source, where)),
            )
        )
    reasons = tuple(data.get("throttle_reasons") or ())
    unknown = [r for r in reasons if r not in THROTTLE_REASONS + AMD_VIOLATIONS]
    if unknown:
        raise HostConfigError(
            "{}: field gpu_health.throttle_reasons: unknown {!r}".format(source, unknown[0])
        )
    ecc = data.get("ecc_uncorrectable", 0)
    if not isinstance(ecc, int) or isinstance(ecc, bool) or ecc < 0:
        raise HostConfigError("{}: field gpu_health.ecc_uncorrectable must be >= 0".format(source))
    return GpuHealth(
        tuple(processes),
        reasons,
        ecc,
        _held_memory(data, source),
        _xid_events(data, source),
        _amdgpu_events(data, source),
    )


def _items(data: Mapping[str, Any], name: str, source: str) -> List[Tuple[str, Mapping[str, Any]]]:
    found = []
    for i, item in enumerate(data.get(name) or []):
        where = "{} gpu_health.{}[{}]".format(source, name, i)
        if not isinstance(item, Mapping):
            raise HostConfigError("{}: must be an object".format(where))
        found.append((where, item))
    return found


def _held_memory(data: Mapping[str, Any], source: str) -> Tuple[HeldMemory, ...]:
    return tuple(
        HeldMemory(_field(item, "gpu", int, where), _field(item, "used_memory_mib", int, where))
        for where, item in _items(data, "held_memory", source)
    )


def _xid_events(data: Mapping[str, Any], source: str) -> Tuple[XidEvent, ...]:
    events = []
    for where, item in _items(data, "xid_events", source):
        merged = dict({"message": XidEvent.message, "seconds_ago": 0.0}, **item)
        events.append(
            XidEvent(
                gpu=_field(merged, "gpu", int, where),
                code=_field(merged, "code", int, where),
                message=_field(merged, "message", str, where),
                seconds_ago=_field(merged, "seconds_ago", float, where),
            )
        )
    return tuple(events)


def _amdgpu_events(data: Mapping[str, Any], source: str) -> Tuple[AmdgpuEvent, ...]:
    events = []
    for where, item in _items(data, "amdgpu_events", source):
        merged = dict({"seconds_ago": 0.0}, **item)
        kind = _field(merged, "kind", str, where)
        if kind not in AMDGPU_EVENT_KINDS:
            raise HostConfigError("{}: field kind: unknown {!r}".format(where, kind))
        gpu = _field(merged, "gpu", int, where)
        events.append(AmdgpuEvent(gpu, kind, _field(merged, "seconds_ago", float, where)))
    return tuple(events)


def host_config_from_dict(data: Mapping[str, Any], source: str) -> HostConfig:
    """Validate a host config; omitted fields come from the preset named by `preset`."""
    base_name = data.get("preset", DEFAULT_HOST_PRESET)
    if base_name not in HOST_PRESETS:
        raise HostConfigError(
            "{}: field preset: unknown host preset {!r}".format(source, base_name)
        )
    merged = _merge(HOST_PRESETS[base_name], {k: v for k, v in data.items() if k != "preset"})
    config = HostConfig(
        name=_field(merged, "name", str, source),
        hostname=_field(merged, "hostname", str, source),
        gpu_vendor=_field(merged, "gpu.vendor", str, source),
        gpu_model=_field(merged, "gpu.model", str, source),
        gpu_count=_field(merged, "gpu.count", int, source),
        gpu_memory_mib=_field(merged, "gpu.memory_mib", int, source),
        driver_version=_field(merged, "driver_version", str, source),
        cuda_version=_field(merged, "cuda_version", str, source, optional=True),
        rocm_version=_field(merged, "rocm_version", str, source, optional=True),
        vllm_version=_field(merged, "vllm_version", str, source),
        host_memory_gib=_field(merged, "host_memory_gib", float, source),
        offload_tier=_tier(merged, source),
        gpu_health=_health(merged.get("gpu_health") or {}, source),
    )
    _check_ranges(config, source)
    return config


def _check_ranges(config: HostConfig, source: str) -> None:
    if config.gpu_vendor not in ("nvidia", "amd"):
        raise HostConfigError("{}: field gpu.vendor must be 'nvidia' or 'amd'".format(source))
    _check_vendor_knobs(config, source)
    if not 0 < config.gpu_count <= 64:
        raise HostConfigError("{}: field gpu.count must be from 1 to 64".format(source))
    if config.gpu_memory_mib <= 0 or config.host_memory_gib <= 0:
        raise HostConfigError("{}: memory sizes must be > 0".format(source))


def _check_vendor_knobs(config: HostConfig, source: str) -> None:
    """A knob of the other vendor's tools would print nothing: refuse it rather than ignore it."""
    health = config.gpu_health
    foreign = {
        "nvidia": [("amdgpu_events", bool(health.amdgpu_events))]
        + [("throttle_reasons", r in AMD_VIOLATIONS) for r in health.throttle_reasons],
        "amd": [("xid_events", bool(health.xid_events))],
    }[config.gpu_vendor]
    for name, present in foreign:
        if present:
            raise HostConfigError(
                "{}: field gpu_health.{} does not apply to {} GPUs".format(
                    source, name, config.gpu_vendor
                )
            )


def load_host_config_file(path: str) -> HostConfig:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        message = "{}: cannot read host config ({})".format(path, error.strerror)
        raise HostConfigError(message) from None
    except ValueError as error:
        raise HostConfigError("{}: not valid JSON ({})".format(path, error)) from None
    if not isinstance(data, dict):
        raise HostConfigError("{}: a host config must be a JSON object".format(path))
    return host_config_from_dict(data, path)


def resolve_host_config(
    path: Optional[str], preset: Optional[str], environ: Mapping[str, str]
) -> HostConfig:
    """--host-config, else --host-preset, else $SIMHOST_HOST_CONFIG, else the default preset."""
    if path and preset:
        raise HostConfigError("--host-config and --host-preset: give one, not both")
    if preset:
        if preset not in HOST_PRESETS:
            names = ", ".join(sorted(HOST_PRESETS))
            raise HostConfigError("--host-preset: unknown {!r} (choose {})".format(preset, names))
        return host_config_from_dict({"preset": preset}, "preset " + preset)
    chosen = path or environ.get(ENV_HOST_CONFIG)
    if chosen:
        return load_host_config_file(chosen)
    return host_config_from_dict({}, "built-in default")


def tier_report(config: HostConfig) -> Dict[str, Any]:
    """What `simhost tier --json` prints."""
    tier = config.offload_tier
    return {
        "present": tier.present,
        "kind": tier.kind,
        "capacity_gib": tier.capacity_gib,
        "bandwidth_gib_s": tier.bandwidth_gib_s,
    }
