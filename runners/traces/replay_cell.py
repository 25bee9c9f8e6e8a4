"""A replayed cell: which replay a cell of a spec sends (its name, seed, settings and the plan
file the run keeps), the hit curve of a down-sampled replay's kept sample, and the measurement
its per-request records give (the clauses' metrics and the replay's fidelity). Pure: the one
reading shared by the run's bench step and the offline evidence verifier
(gates/evidence/replay_recompute.py), so both compute the same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from runners.adapters.replay_records import summarize
from runners.traces.characterize import characterize
from runners.traces.fidelity import (
    MAX_ARRIVAL_ERROR_P99_MS,
    PlannedRequest,
    RequestRecord,
    check_fidelity,
)
from runners.traces.readers.formats import FORMATS, trace_block_tokens
from runners.traces.records import TraceRecord
from runners.traces.replay import ReplaySettings, kept_requests

# Seconds the caches fill before requests count, when the spec's trace names none.
DEFAULT_WARMUP_S = 0.0


def replay_seed(workload: Mapping[str, Any], tier: int) -> int:
    return int(workload["seed"]) + tier


def replay_name(workload: Mapping[str, Any], tier: int) -> str:
    """The replay's file stem: the trace's digest, its settings' seed and the tier; plain
    letters and digits, so the host path needs no quoting beyond the template's own."""
    return f"replay-{workload['trace']['sha256'][:16]}-s{replay_seed(workload, tier)}-c{tier}"


def plan_file(workload: Mapping[str, Any], tier: int) -> str:
    """The raw file (a run's artifact, a bundle's `files/` member) that keeps the replay's plan:
    its digest and each request's index, scheduled time, token counts and `measured`."""
    return f"replay/{replay_name(workload, tier)}.plan.json"


def replay_settings(workload: Mapping[str, Any], tier: int) -> ReplaySettings:
    trace = workload["trace"]
    return ReplaySettings(
        seed=replay_seed(workload, tier),
        block_tokens=trace_block_tokens(trace["format"], trace.get("block_tokens")),
        chained_ids=FORMATS[trace["format"]].chained_ids,
        time_scale=float(trace.get("time_scale", 1.0)),
        sample_fraction=float(trace.get("sample_fraction", 1.0)),
        warmup_s=float(trace.get("warmup_s", DEFAULT_WARMUP_S)),
    )


def sample_hit_profile(
    records: Iterable[TraceRecord], workload: Mapping[str, Any], tier: int
) -> dict[str, Any] | None:
    """The hit curve of the requests a down-sampled replay keeps, every one counted (the
    server's counters span the warm-up too), marked with the fraction it characterises; None
    when the replay sends the whole trace (its stored characterisation is the curve)."""
    settings = replay_settings(workload, tier)
    if settings.sample_fraction >= 1.0:
        return None
    kept = (request.record for request in kept_requests(records, settings))
    profile = characterize(
        kept, block_tokens=settings.block_tokens, chained_ids=settings.chained_ids
    )
    return {
        "sample_fraction": settings.sample_fraction,
        "requests": profile.requests,
        "prefix_information": profile.prefix_information,
        "infinite_cache_hit_ratio": profile.infinite_cache_hit_ratio,
        "hit_ratio_curve": profile.hit_ratio_curve,
    }


def arrival_bar_ms(workload: Mapping[str, Any]) -> float:
    """The arrival-time bar both parties signed in `workload.trace` (left out: 10 ms)."""
    return float(workload["trace"].get("max_arrival_error_p99_ms", MAX_ARRIVAL_ERROR_P99_MS))


def replay_cell_metrics(
    plan: Mapping[str, Any],
    records: bytes,
    *,
    workload: Mapping[str, Any],
    tier: int,
    server: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The cell's normalized metrics from its records file, with `replay`: the plan's digest and
    the fidelity of the records against the plan (the achieved hit rate is the server's GPU
    prefix-cache hit rate over the bench, when its counters said one)."""
    planned = [PlannedRequest.from_row(row) for row in plan["requests"]]
    rows = [json.loads(line) for line in records.splitlines() if line.strip()]
    metrics = summarize([_row(row) for row in rows], max_concurrency=tier)
    hit = (server or {}).get("prefix_cache_hit_rate")
    fidelity = check_fidelity(
        planned,
        [RequestRecord.from_dict(row) for row in rows],
        achieved_hit_rate=hit if isinstance(hit, int | float) else None,
        max_arrival_error_p99_ms=arrival_bar_ms(workload),
    )
    metrics["replay"] = {"digest": plan["digest"], "fidelity": fidelity.to_dict()}
    return metrics


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": row["index"],
        "sent_s": float(row["sent_s"]),
        "send_at_s": row.get("send_at_s"),
        "ok": row.get("ok") is True,
        "measured": row.get("measured", True) is not False,
        "prompt_tokens": row.get("prompt_tokens"),
        "output_tokens": row.get("output_tokens"),
        "ttft_ms": row.get("ttft_ms"),
        "e2el_ms": row.get("e2el_ms"),
        "itl_ms": row.get("itl_ms") or [],
    }
