"""A G3 trace replay's predicted TTFT p50 band per tier (gates.planner.replay_band), for the
decision context: the engagement's model on the accepted inventory's GPUs with the server's KV
cache (as the run's predicted band reads them), the trace's stored bytes and what the replay
step recorded. The model takes seconds per tier, so the bands are cached by their inputs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict

from gates.cache import cache_get_or_compute
from gates.models import Run, WorkloadTrace
from gates.planner.replay_band import ReplayModel, replay_ttft_bands
from gates.planner.run_band import gpu_kind
from gates.services.contract.inventory import accepted_inventory
from gates.services.runs.predictions import run_model_and_kv
from gates.services.runs.step_facts import run_steps
from runners.traces.readers.formats import read_trace_bytes
from runners.traces.records import TraceRecord

CACHE_S = 7 * 24 * 3600  # a G3 runs for days at most; the same inputs give the same bands


def g3_ttft_predictions(run: Run, offload_gib: float | None) -> list[dict] | None:
    """Per tier of a G3 that replays a trace, the planner's TTFT band (or why there is none);
    None for a synthetic workload. It travels in the decision context, so the offline verifier
    takes it as recorded."""
    document = run.spec.document
    workload = document.get("workload") or {}
    if not workload.get("trace"):
        return None
    tiers = [int(tier) for tier in document["tiers"]]
    deployment = replay_deployment(run, offload_gib)
    recorded = replays_recorded(run)
    key = _cache_key(workload, tiers, deployment, recorded)
    records = _trace_records(run, workload["trace"])
    return cache_get_or_compute(
        key,
        lambda: replay_ttft_bands(records, workload, tiers, deployment, recorded),
        timeout=CACHE_S,
    )


def replay_deployment(run: Run, offload_gib: float | None) -> ReplayModel | str:
    """What the replay is modelled on, or the first thing unknown, said in words."""
    engagement = run.gate.engagement
    inventory = accepted_inventory(engagement)
    if inventory is None:
        return "no inventory was accepted at G1, so the GPUs are unknown"
    gpu = gpu_kind(inventory)
    if gpu is None:
        return f"the performance model has no figures for the GPUs {inventory.get('gpu_models')}"
    server = run.spec.document.get("server") or {}
    gpus = server.get("tensor_parallel_size") or inventory.get("gpu_count")
    model, kv_tokens, _ = run_model_and_kv(engagement, run)
    if not gpus:
        return "the inventory does not count the GPUs"
    if model is None:
        return "the engagement's model names no planner preset and no planner inputs are saved"
    if not kv_tokens:
        return "the GPU KV cache size is unknown: no server reported it, no planner inputs saved"
    if not offload_gib:
        return "the spec does not state the offload tier's size (server.offload_gib)"
    return ReplayModel(model, gpu, int(gpus), int(kv_tokens), float(offload_gib))


def replays_recorded(run: Run) -> dict:
    """What the run's replay step built, by replay name (its progress.replays)."""
    found: dict = {}
    for detail in run_steps(run):
        found.update(((detail or {}).get("progress") or {}).get("replays") or {})
    return found


def _trace_records(run: Run, trace: dict) -> Callable[[], Iterable[TraceRecord]] | None:
    stored = WorkloadTrace.objects.filter(
        engagement_id=run.gate.engagement_id, sha256=trace.get("sha256")
    )
    if not stored.exists():
        return None

    def records() -> Iterable[TraceRecord]:
        content = bytes(stored.values_list("content", flat=True).first() or b"")
        return read_trace_bytes(content, trace["format"], trace.get("block_tokens"))

    return records


def _cache_key(
    workload: dict, tiers: list[int], deployment: ReplayModel | str, recorded: dict
) -> str:
    inputs = {
        "workload": workload,
        "tiers": tiers,
        "deployment": deployment if isinstance(deployment, str) else asdict(deployment),
        "recorded": recorded,
    }
    canonical = json.dumps(inputs, sort_keys=True, default=str).encode()
    # the version changes with the model, so a stale band is never read back (v5: every TTFT
    # statistic's change band, the p50 read at the nearest rank)
    return "replay-ttft:v5:" + hashlib.sha256(canonical).hexdigest()
