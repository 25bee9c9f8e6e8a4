"""The predicted TTFT p50 band of a G3 trace replay, per concurrency tier: the requests the
replay sends at that tier (runners.traces.replay_cell's settings, the one sampling and schedule
every arm gets) through simhost's engine (simhost.engine.replay_predict), on the engagement's
model and GPUs with the server's KV cache. Pure: trace records and plain data in, the bands the
decision context carries out; anything unknown gives the reason, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gates import figures
from gates.planner.architectures import ModelArch, PlannerError
from gates.planner.speed import LINK_EFFICIENCY_RANGE, SpeedRequest, preset_for
from runners.traces.records import TraceRecord
from runners.traces.replay import KeptRequest, kept_requests, prompt_length
from runners.traces.replay_cell import replay_name, replay_settings
from simhost.engine.predict import SessionWorkload
from simhost.engine.replay_predict import (
    JITTER_SEEDS,
    MAX_REQUESTS,
    SEND_JITTER_S,
    ChangeBand,
    ReplayedRequest,
    ReplayTtftPrediction,
    predict_replay_ttft,
)

# What the engine leaves out of a served replay (HTTP, streaming, the client's own loop), added
# to each end as a share of it: a zero-width band would call every measurement a model error.
RESOLUTION = 0.05
NO_SESSIONS = SessionWorkload(sessions=1, prefix=0, suffix=1, output=1)  # unused by the preset


@dataclass(frozen=True)
class ReplayModel:
    """The deployment the replay is modelled on, each part from where the run knew it."""

    model: ModelArch
    gpu: str  # a key of simhost.engine.presets.GPUS
    gpus: int
    kv_tokens: int
    offload_gib: float


def replay_ttft_bands(
    records: Callable[[], Iterable[TraceRecord]] | None,
    workload: Mapping[str, Any],
    tiers: Sequence[int],
    deployment: ReplayModel | str,
    recorded: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Per tier: {tier, arms: {role: [low_ms, high_ms]}, changes: {"offload/resident": [low,
    high]} (TTFT p50), metric_changes: {"ttft_p99": {...}, ...}, modelled, kept, capped,
    refused, assumes} or {tier, missing: why}. `records` streams the stored trace afresh (one
    pass per tier); `recorded` is the replay step's progress.replays (name -> what it built)."""
    return [_tier_band(records, workload, int(tier), deployment, recorded) for tier in tiers]


def _tier_band(
    records: Callable[[], Iterable[TraceRecord]] | None,
    workload: Mapping[str, Any],
    tier: int,
    deployment: ReplayModel | str,
    recorded: Mapping[str, Any],
) -> dict[str, Any]:
    if isinstance(deployment, str):
        return {"tier": tier, "missing": deployment}
    if records is None:
        return {"tier": tier, "missing": "the engagement no longer holds the trace's bytes"}
    if not isinstance(recorded.get(replay_name(workload, tier)), Mapping):  # before reading it
        return {
            "tier": tier,
            "missing": f"the replay step recorded no replay {replay_name(workload, tier)}",
        }
    head, kept = replay_head(records(), workload, tier)
    reason = _unlike_the_replay(workload, tier, kept, recorded)
    if reason is not None:
        return {"tier": tier, "missing": reason}
    try:
        prediction = predict_replay_ttft(
            preset_for(_speed_request(deployment, tier)),
            head,
            tier,
            trace_block_tokens=replay_settings(workload, tier).block_tokens,
            offload_gib=deployment.offload_gib,
            kept=kept,
        )
    except (PlannerError, RuntimeError, ValueError) as error:  # RuntimeError: the engine stalled
        return {"tier": tier, "missing": f"the model refused the replay: {error}"}
    return band_document(prediction, deployment)


def replay_head(
    records: Iterable[TraceRecord], workload: Mapping[str, Any], tier: int
) -> tuple[list[ReplayedRequest], int]:
    """The first MAX_REQUESTS requests the replay sends at this tier, and how many it sends."""
    settings = replay_settings(workload, tier)
    head: list[ReplayedRequest] = []
    count = 0
    for request in kept_requests(records, settings):
        if count < MAX_REQUESTS:
            head.append(replayed(request, settings.block_tokens))
        count += 1
    return head, count


def replayed(request: KeptRequest, block_tokens: int | None) -> ReplayedRequest:
    keys = request.block_keys
    return ReplayedRequest(
        send_at_s=request.send_at_s,
        prompt_tokens=prompt_length(request.record, keys, block_tokens),
        block_keys=tuple(keys) if keys else None,
        output_tokens=request.record.output_tokens,
        measured=request.measured,
    )


def _unlike_the_replay(
    workload: Mapping[str, Any], tier: int, kept: int, recorded: Mapping[str, Any]
) -> str | None:
    """Why the requests rebuilt here are not the ones the replay step sent, if they are not: it
    recorded how many it sent (and a down-sample's own characterisation), so both must agree."""
    name = replay_name(workload, tier)
    built = recorded.get(name)
    if not isinstance(built, Mapping):
        return f"the replay step recorded no replay {name}"
    sample = built.get("sample_profile")
    if float(workload["trace"].get("sample_fraction", 1.0)) < 1.0 and not isinstance(
        sample, Mapping
    ):
        return "the replay's sample was not characterised (its replay step did not record it)"
    sent = sample.get("requests") if isinstance(sample, Mapping) else built.get("requests")
    if sent != kept:
        return f"the replay step sent {sent} requests; the trace gives {kept} with its settings"
    return None


def _speed_request(deployment: ReplayModel, tier: int) -> SpeedRequest:
    return SpeedRequest(
        model=deployment.model,
        gpu=deployment.gpu,
        gpus=deployment.gpus,
        kv_tokens=deployment.kv_tokens,
        workload=NO_SESSIONS,
        concurrency=tier,
    )


def band_document(prediction: ReplayTtftPrediction, deployment: ReplayModel) -> dict[str, Any]:
    """One tier as the context carries it: each arm kind's p50 band in ms (the spec's arms map
    their roles to these kinds) and the TTFT change offload / baseline from the paired runs
    ("offload/resident": [low, high], a ratio), each widened by RESOLUTION: the p50's under
    `changes` (where contexts have always carried it), every other statistic's under
    `metric_changes` by the clause metric that names it ("ttft_p99": {"offload/resident": ...})."""
    arms = {
        arm: [
            band.low_s * 1000.0 * (1 - RESOLUTION),
            band.high_s * 1000.0 * (1 + RESOLUTION),
        ]
        for arm, band in prediction.arms.items()
    }
    by_metric = {
        f"ttft_{statistic}": _widened(bands)
        for statistic, bands in prediction.statistic_changes.items()
    }
    return {
        "tier": prediction.concurrency,
        "arms": arms,
        "changes": by_metric.pop("ttft_p50"),
        "metric_changes": by_metric,
        "modelled": prediction.modelled_requests,
        "kept": prediction.kept_requests,
        "capped": prediction.capped,
        "refused": prediction.refused_requests,
        "assumes": assumptions_text(deployment, prediction),
    }


def _widened(bands: Mapping[str, ChangeBand]) -> dict[str, list[float]]:
    # the ratio widened as each p50 is: what the engine leaves out need not cancel between arms
    return {
        name: [band.low * (1 - RESOLUTION), band.high * (1 + RESOLUTION)]
        for name, band in bands.items()
    }


def assumptions_text(deployment: ReplayModel, prediction: ReplayTtftPrediction) -> str:
    low, high = LINK_EFFICIENCY_RANGE
    cap = (
        f"the first {figures.count(prediction.modelled_requests, 'request')} of "
        f"{figures.number(prediction.kept_requests)} (the model's cap)"
        if prediction.capped
        else f"all {figures.count(prediction.kept_requests, 'request')}"
    )
    return (
        f"{deployment.model.name} on {deployment.gpus} x {deployment.gpu}, "
        f"{figures.count(deployment.kv_tokens, 'token')} of GPU KV cache, "
        f"{figures.number(deployment.offload_gib)} GiB offload tier; {cap} the replay sends at "
        f"c={prediction.concurrency}, open loop; {len(JITTER_SEEDS)} seeded runs sending each "
        f"request up to {SEND_JITTER_S * 1000:.0f} ms late, a request sent mid-step clocked "
        f"from its send (vLLM) or the step's start (simhost), the connector at "
        f"{figures.share(low)} to {figures.share(high)} of the host links; "
        f"{figures.share(RESOLUTION)} more each way"
    )
