"""The predicted TTFT-saving band of one G3 run, and what it measured against it.

The band per tier comes from gates.planner.speed (simhost's own performance model) for the
spec's workload on the host's accepted inventory; anything the model needs that is unknown makes
the prediction None with the reason, never a guess. Pure: plain data in and out, no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gates import figures
from gates.planner import PlanRequest, PlanResult
from gates.planner.architectures import ModelArch, PlannerError
from gates.planner.speed import LINK_EFFICIENCY_RANGE, SpeedRequest, ttft_band
from runners.workloads import workload_num_prefixes
from simhost.engine.predict import SessionWorkload
from simhost.engine.presets import GPU_BY_HOST_MODEL

# The model's own resolution, added to each end: its runs leave out what differs between
# prompts of one workload (their exact lengths and block boundaries), which moved simhost's
# measurement of the demo's short chat 0.002 % past a zero-width band.
RESOLUTION = 0.02
# What simhost's performance model moves and reads: 2-byte K/V and weights (perf.ModelShape).
MODELLED_DTYPES = ("bf16", "fp16")
PLANNED_KV_SOURCE = "the KV planner's capacity for these inputs"
# The G3 TTFT clause the measurement is read from: offload against the resident baseline.
TTFT_METRIC, TTFT_COMPARE = "ttft_p50", "offload/baseline"


@dataclass(frozen=True)
class BandInputs:
    """What the band is predicted from, each with where it came from (shown beside the band)."""

    model: ModelArch
    gpu: str  # a key of simhost.engine.presets.GPUS
    gpus: int
    kv_tokens: int
    kv_source: str
    workload: SessionWorkload
    tiers: tuple[int, ...]


def gpu_kind(inventory: Mapping[str, Any] | None) -> str | None:
    """The performance model's GPU for an inventory's one GPU model name; None when the host has
    several kinds or one the model has no figures for (never the nearest guess)."""
    names = (inventory or {}).get("gpu_models") or []
    if len(names) != 1:
        return None
    squeezed = str(names[0]).upper().replace(" ", "")
    for key in sorted(GPU_BY_HOST_MODEL, key=len, reverse=True):
        if key in squeezed:
            return GPU_BY_HOST_MODEL[key]
    return None


def session_workload(workload: Mapping[str, Any]) -> SessionWorkload | str:
    """A spec workload as the model's sessions, or the reason it cannot be one."""
    dataset = workload.get("dataset")
    try:
        if dataset == "random":  # nothing shared: every prompt is a fresh session of its own
            prompts = int(workload["num_prompts"])
            return SessionWorkload(
                sessions=prompts,
                prefix=0,
                suffix=int(workload["input_len"]),
                output=int(workload["output_len"]),
                resumes=1,
            )
        if dataset == "cold_recovery" or workload.get("cold_recovery"):
            sessions = workload_num_prefixes(dict(workload))
            return SessionWorkload(
                sessions=sessions,
                prefix=int(workload["prefix_len"]),
                suffix=int(workload["suffix_len"]),
                output=int(workload["output_len"]),
                resumes=max(1, int(workload["num_prompts"]) // sessions),
            )
    except (KeyError, TypeError, ValueError) as error:
        return f"the workload lacks a length the model needs ({error})"
    return (
        f"the model predicts cold-recovery and random workloads; a {dataset} workload is not "
        "one of them"
    )


def band_inputs(
    spec: Mapping[str, Any],
    inventory: Mapping[str, Any] | None,
    model: ModelArch | None,
    kv_tokens: int | None,
    kv_source: str,
) -> BandInputs | str:
    """Everything the band needs, or the first thing missing, said in words."""
    if inventory is None:
        return "no inventory was accepted at G1, so the GPUs are unknown"
    gpu = gpu_kind(inventory)
    if gpu is None:
        return f"the performance model has no figures for the GPUs {inventory.get('gpu_models')}"
    gpus = (spec.get("server") or {}).get("tensor_parallel_size") or inventory.get("gpu_count")
    if not gpus:
        return "the inventory does not count the GPUs"
    if model is None:
        return "the engagement's model names no planner preset and no planner inputs are saved"
    if model.heads is None or model.mla_latent_dim is not None:
        return f"the model needs {model.name}'s query heads and K/V heads (not MLA)"
    if not kv_tokens:
        return (
            "the GPU KV cache size is unknown: no server of this engagement reported it and no "
            "planner inputs are saved"
        )
    workload = session_workload(spec.get("workload") or {})
    if isinstance(workload, str):
        return workload
    tiers = tuple(int(tier) for tier in spec.get("tiers") or ())
    return BandInputs(model, gpu, int(gpus), int(kv_tokens), kv_source, workload, tiers)


def planner_band_inputs(
    plan_request: PlanRequest,
    result: PlanResult,
    gpu: str,
    workload: SessionWorkload,
    tiers: Sequence[int],
) -> BandInputs | str:
    """The planner page's band: its deployment (one server, the plan's KV capacity) on the
    chosen GPU kind, or what the model cannot take, said in words."""
    deployment = plan_request.deployment
    model = deployment.model
    weights = deployment.weight_dtype or model.weight_dtype
    if model.heads is None or model.mla_latent_dim is not None or not model.parameters:
        return f"the model needs {model.name}'s parameters, query heads and K/V heads (not MLA)"
    if result.replicas != 1:
        return (
            f"the model runs one server; this plan has {result.replicas} replicas of tensor "
            f"parallel {result.tensor_parallel_size} (set it to the GPU count)"
        )
    if deployment.kv_dtype not in MODELLED_DTYPES or weights not in MODELLED_DTYPES:
        return (
            f"the model moves bf16 KV and reads bf16 weights; {deployment.kv_dtype} KV with "
            f"{weights} weights is not modelled"
        )
    kv_tokens = result.kv_capacity_per_gpu_bytes // result.kv_bytes_per_token_per_gpu
    if kv_tokens <= 0:
        return "no VRAM is left for KV after the weights"
    tiers = tuple(int(tier) for tier in tiers)
    return BandInputs(model, gpu, result.gpus, kv_tokens, PLANNED_KV_SOURCE, workload, tiers)


def predict_run_band(inputs: BandInputs | str) -> dict[str, Any]:
    """{"predicted": [per tier: concurrency, low, high (fractions)], "assumes": words} or
    {"predicted": None, "reason": words}."""
    if isinstance(inputs, str):
        return {"predicted": None, "reason": inputs}
    tiers = []
    for concurrency in inputs.tiers:
        try:
            tiers.append(predict_tier(inputs, concurrency))
        except BandRefusedError as error:
            return {"predicted": None, "reason": str(error)}
    return {"predicted": tiers, "assumes": assumptions_text(inputs)}


class BandRefusedError(Exception):
    """The model could not run these inputs (it says why)."""


def predict_tier(inputs: BandInputs, concurrency: int) -> dict[str, Any]:
    """One tier's band: {concurrency, low, high} (fractions), each end widened by RESOLUTION.
    Seconds to a minute of the model: callers that show progress call it tier by tier."""
    try:
        band = ttft_band(speed_request(inputs, concurrency))
    except (PlannerError, RuntimeError) as error:  # RuntimeError: the engine stalled
        raise BandRefusedError(f"the model refused the run: {error}") from None
    low, high = band.ttft_change_low - RESOLUTION, band.ttft_change_high + RESOLUTION
    return {"concurrency": concurrency, "low": low, "high": high}


def band_inputs_to_dict(inputs: BandInputs) -> dict[str, Any]:
    """Plain JSON for a database row and a digest: the same inputs give the same dict."""
    return {**asdict(inputs), "tiers": list(inputs.tiers)}


def band_inputs_from_dict(data: Mapping[str, Any]) -> BandInputs:
    model = {**data["model"], "notes": tuple(data["model"].get("notes") or ())}
    return BandInputs(
        model=ModelArch(**model),
        gpu=data["gpu"],
        gpus=int(data["gpus"]),
        kv_tokens=int(data["kv_tokens"]),
        kv_source=data["kv_source"],
        workload=SessionWorkload(**data["workload"]),
        tiers=tuple(int(tier) for tier in data["tiers"]),
    )


def speed_request(inputs: BandInputs, concurrency: int) -> SpeedRequest:
    return SpeedRequest(
        model=inputs.model,
        gpu=inputs.gpu,
        gpus=inputs.gpus,
        kv_tokens=inputs.kv_tokens,
        workload=inputs.workload,
        concurrency=concurrency,
    )


def assumptions_text(inputs: BandInputs) -> str:
    low, high = LINK_EFFICIENCY_RANGE
    return (
        f"{inputs.model.name} on {inputs.gpus} x {inputs.gpu} (one server, TP {inputs.gpus}), "
        f"{figures.count(inputs.kv_tokens, 'token')} of GPU KV cache ({inputs.kv_source}); "
        f"{describe_workload(inputs.workload)}; the offload connector reaching "
        f"{figures.share(low)} to {figures.share(high)} of the host links' DMA speed, sessions "
        f"resumed in order or shuffled, {figures.share(RESOLUTION)} more each way for what "
        "differs between prompts; the tier's own bandwidth is not known here, so the links are "
        "the limit"
    )


def describe_workload(workload: SessionWorkload) -> str:
    fresh = figures.count(workload.suffix, "fresh token")
    if workload.prefix == 0:
        return f"{figures.count(workload.sessions, 'prompt')} of {fresh}, no reuse"
    return (
        f"{figures.count(workload.sessions, 'session')} of a "
        f"{figures.number(workload.prefix)}-token prefix + {fresh}, warmed, pushed out of VRAM, "
        f"resumed {figures.count(workload.resumes, 'time')} each"
    )


def measured_ttft_changes(cells: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Per tier: the G3 decision's estimate of offload vs resident TTFT p50, as a change."""
    changes: dict[int, float] = {}
    for cell in cells:
        ratio = (cell.get("ratio") or {}).get("estimate")
        if cell.get("metric") == TTFT_METRIC and cell.get("compare") == TTFT_COMPARE and ratio:
            changes[int(cell["tier"])] = float(ratio) - 1.0
    return changes


def measured_against_predicted(
    prediction: Mapping[str, Any] | None, cells: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per predicted tier: the band, what was measured (None before a decision) and whether it
    lies inside; a measurement outside gets a note, never a verdict."""
    measured = measured_ttft_changes(cells)
    rows = []
    for tier in (prediction or {}).get("predicted") or []:
        concurrency, value = tier["concurrency"], measured.get(tier["concurrency"])
        inside = None if value is None else tier["low"] <= value <= tier["high"]
        rows.append(
            {
                "concurrency": concurrency,
                "band": [tier["low"], tier["high"]],
                "band_text": band_text(tier),
                "measured": value,
                "measured_text": "" if value is None else figures.change(value),
                "inside": inside,
                "note": _outside_note(concurrency, value, tier),
            }
        )
    return rows


def _outside_note(concurrency: int, value: float | None, tier: Mapping[str, float]) -> str:
    if value is None or tier["low"] <= value <= tier["high"]:
        return ""
    return (
        f"measured {figures.change(value)} at c={concurrency}, outside the predicted "
        f"{band_text(tier)}: the model or the host differ"
    )


def band_text(tier: Mapping[str, float]) -> str:
    return f"{figures.change(tier['low'])} to {figures.change(tier['high'])}"
