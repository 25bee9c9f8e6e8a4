"""The KV planner linked to engagements and G3 specs: an engagement's saved planner inputs, and
whether a spec's workload overflows the VRAM left for KV (the `require_kv_exceeds_vram` rule).
Reads an engagement's fields only; writes nothing (saving is gates.services.planning).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol, TypeGuard

from gates.planner import (
    GIB,
    Deployment,
    PlannerError,
    PlanRequest,
    kv_capacity_per_gpu,
    preset_for_model_name,
    request_from_dict,
    workload_exceeds_vram,
)
from runners.workloads import workload_num_prefixes


class Engagement(Protocol):
    """What the planner reads of an engagement (gates.models.Engagement has both fields)."""

    kv_plan: dict[str, Any] | None
    model_name: str


# vllm bench's --prefix-repetition-num-prefixes default, used when a spec does not name it.
SHARED_PREFIX_DATASETS = ("prefix_repetition", "cold_recovery")
_NO_PLAN = (
    "No planner inputs are saved for this engagement, so Tollgate cannot tell whether this "
    "workload overflows GPU memory; save them from the KV planner."
)


@dataclass(frozen=True)
class SpecWorkload:
    """A spec's workload in the planner's terms (the keyword arguments of workload_exceeds_vram)."""

    concurrency: int
    prefix_tokens: int
    suffix_tokens: int
    output_tokens: int
    distinct_prefixes: int | None  # None: every request brings its own prompt, nothing shared

    def describe(self) -> str:
        tokens = self.prefix_tokens + self.suffix_tokens + self.output_tokens
        shared = (
            f" over {self.distinct_prefixes:,} distinct {self.prefix_tokens:,}-token prefixes"
            if self.distinct_prefixes
            else ""
        )
        return f"{self.concurrency:,} concurrent requests of {tokens:,} tokens{shared}"


@dataclass(frozen=True)
class SpecKvCheck:
    """Whether the workload overflows VRAM (None: unknown) and a sentence saying why."""

    exceeds: bool | None
    reason: str


def engagement_plan_inputs(engagement: Engagement) -> dict[str, Any]:
    """Planner inputs to start from: the saved ones, else the preset the model name names."""
    if engagement.kv_plan:
        return dict(engagement.kv_plan)
    preset = preset_for_model_name(engagement.model_name or "")
    return {"model": preset} if preset else {}


def inputs_with_overrides(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`base` inputs with `overrides` on top; a model or config in `overrides` replaces both."""
    merged = dict(base)
    if overrides.get("model") is not None or overrides.get("config") is not None:
        merged.pop("model", None)
        merged.pop("config", None)
    merged.update({name: value for name, value in overrides.items() if value is not None})
    return merged


def engagement_plan_request(engagement: Engagement) -> PlanRequest | None:
    """The engagement's saved planner inputs as a PlanRequest; None when none are saved.

    Raises PlannerError when the saved inputs no longer validate (e.g. a preset was renamed).
    """
    if not engagement.kv_plan:
        return None
    return request_from_dict(engagement.kv_plan)


def spec_workload_exceeds_vram(
    engagement: Engagement, gate_spec_document: Mapping[str, Any]
) -> bool | None:
    """Does the spec's workload overflow the engagement's VRAM left for KV, so offload is hit?

    None when the engagement has no (valid) saved planner inputs or the workload lacks the
    numbers to size its KV.
    """
    return spec_kv_check(engagement, gate_spec_document).exceeds


def spec_kv_warning(engagement: Engagement, gate_spec_document: Mapping[str, Any]) -> str:
    """The warning for the G3 page (templates/gates/_kv_warning.html), or "" when all is well.

    Warns when the workload fits (offload would never be exercised), and, when the spec
    requires the KV to exceed VRAM, when that cannot be told.
    """
    check = spec_kv_check(engagement, gate_spec_document)
    if check.exceeds is False:
        return check.reason
    validity = gate_spec_document.get("validity") or {}
    if check.exceeds is None and validity.get("require_kv_exceeds_vram"):
        return check.reason
    return ""


def spec_kv_check(engagement: Engagement, gate_spec_document: Mapping[str, Any]) -> SpecKvCheck:
    """Both answers at once: whether the workload overflows VRAM, and the sentence why."""
    workload = spec_workload(gate_spec_document)
    if workload is None:
        return SpecKvCheck(None, "The spec's workload does not give the lengths to size its KV.")
    if not engagement.kv_plan:
        return SpecKvCheck(None, _NO_PLAN)
    try:
        saved = request_from_dict(engagement.kv_plan).deployment
    except PlannerError as error:
        return SpecKvCheck(None, f"The saved planner inputs do not validate: {error}.")
    deployment = served_deployment(saved, gate_spec_document.get("server"))
    try:
        exceeds = workload_exceeds_vram(deployment, **asdict(workload))
    except PlannerError as error:
        return SpecKvCheck(None, f"The workload cannot be sized on this deployment: {error}.")
    return SpecKvCheck(exceeds, _verdict_sentence(exceeds, workload, deployment))


def _verdict_sentence(exceeds: bool, workload: SpecWorkload, deployment: Deployment) -> str:
    capacity = kv_capacity_per_gpu(deployment) / GIB
    where = (
        f"{deployment.model.name} on {deployment.gpus} x {deployment.gpu_mem_gib:g} GiB, "
        f"TP {deployment.tp}, leaving {capacity:,.1f} GiB of KV per GPU"
    )
    if exceeds:
        return f"{workload.describe()} overflow the VRAM left for KV ({where})."
    return (
        f"{workload.describe()} fit in the VRAM left for KV ({where}): offload is never "
        "exercised and this gate would measure nothing. Lengthen the prefixes, add prompts or "
        "raise the tiers."
    )


def served_deployment(deployment: Deployment, server: Mapping[str, Any] | None) -> Deployment:
    """The deployment as the spec's `server` block runs it: one vllm serve with that TP (on that
    many GPUs) and that --gpu-memory-utilization."""
    if not server:
        return deployment
    tp = server.get("tensor_parallel_size")
    utilization = server.get("gpu_memory_utilization")
    if tp is not None:
        deployment = replace(deployment, gpus=tp, tensor_parallel_size=tp)
    if utilization is not None:
        deployment = replace(deployment, reserved_fraction=1.0 - utilization)
    return deployment


def spec_workload(document: Mapping[str, Any]) -> SpecWorkload | None:
    """The spec's workload at its highest tier, or None when it lacks the numbers."""
    workload = document.get("workload")
    if not isinstance(workload, Mapping):
        return None
    concurrency = _peak_concurrency(document, workload)
    dataset = workload.get("dataset")
    if concurrency is None or dataset not in (*SHARED_PREFIX_DATASETS, "random"):
        return None
    if dataset == "random":
        lengths = _ints(workload, "input_len", "output_len")
        if lengths is None:
            return None
        return SpecWorkload(concurrency, 0, lengths[0], lengths[1], distinct_prefixes=None)
    lengths = _ints(workload, "prefix_len", "suffix_len", "output_len")
    prefixes = workload_distinct_prefixes(workload)
    if lengths is None or prefixes is None:
        return None
    prefix_len, suffix_len, output_len = lengths
    return SpecWorkload(concurrency, prefix_len, suffix_len, output_len, distinct_prefixes=prefixes)


def workload_distinct_prefixes(workload: Mapping[str, Any]) -> int | None:
    """How many different prefixes must stay cached for reuse to hit (gates.specs.validation
    rule)."""
    if not _is_count(workload.get("num_prompts")):
        return None
    try:
        return workload_num_prefixes(dict(workload))
    except (TypeError, ValueError):
        return None


def _peak_concurrency(document: Mapping[str, Any], workload: Mapping[str, Any]) -> int | None:
    tiers = document.get("tiers")
    peak: int
    if isinstance(tiers, list) and tiers and all(_is_count(tier) for tier in tiers):
        peak = max(tiers)
    elif _is_count(workload.get("max_concurrency")):
        peak = workload["max_concurrency"]
    else:
        return None
    prompts = workload.get("num_prompts")
    # A tier above the prompt count never has more requests in flight than there are prompts.
    return min(peak, prompts) if _is_count(prompts) else peak


def _ints(workload: Mapping[str, Any], *keys: str) -> tuple[int, ...] | None:
    values = [workload.get(key) for key in keys]
    counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    return tuple(counts) if len(counts) == len(values) else None


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
