"""What this engagement's G2 and G3 runs measured on a trace, as points beside its predicted
hit-ratio curve: each replayed cell's hit rates at the cache capacity it ran with. Reads runs
and measurements through gates.tenancy (a viewer sees only their organization's runs); the
capacities come from the engagement's saved KV plan replanned at each cell's tier (the planner,
pure); writes nothing.

Two points per cell, each a share of input tokens as the curve's F(C) is:
- `gpu`: the server's GPU prefix-cache hit rate at the GPU KV pool's capacity (the planner's
  capacity at the tier; the requests in flight hold some of it, so the curve's band there is
  what gates.planner.trace_tiers.replay_hit_bands predicts);
- `tiers` (offload arms): GPU hits plus the offload tier's, g + e (1 - g) with e the external
  hit rate over the tokens the GPU missed, at the larger of the GPU pool and the DRAM tier
  (inclusive tiers: the tier holds the GPU's blocks too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from gates import planner
from gates.models import Gate, Measurement, Run, WorkloadTrace
from gates.planner.capacity import GIB
from gates.planner.trace_tiers import sizes_from_plan
from gates.tenancy import Viewer, visible

HIT_ARM = "offload_hit"  # G2's hit cell (runners.program.sequence.HIT_ARM)


def trace_measured_points(trace: WorkloadTrace, viewer: Viewer) -> dict[str, Any]:
    """{points: [...], missing: why none could be placed, or ""}: one point per replayed cell
    of every run of the trace's engagement this viewer may see that replayed this trace."""
    runs = (
        visible(Run, viewer)
        .filter(
            gate__engagement_id=trace.engagement_id, gate__kind__in=[Gate.Kind.G2, Gate.Kind.G3]
        )
        .select_related("gate", "spec")
        .order_by("gate__kind", "attempt")
    )
    replayed = [(run, cells) for run in runs if (cells := _replayed_cells(run, trace.sha256))]
    if not replayed:
        return {"points": [], "missing": ""}
    kv_plan = trace.engagement.kv_plan
    if not kv_plan:
        why = "the engagement has no saved KV plan, so the capacity each run had is unknown"
        return {"points": [], "missing": why}
    rates = _cell_rates(run for run, _ in replayed)
    points: list[dict[str, Any]] = []
    for run, cells in replayed:
        for (arm, tier), kind in sorted(cells.items()):
            found = rates.get((run.pk, arm, tier))
            if found:
                points += cell_points(
                    run_label(run), kv_plan, _offload_gib(run), tier, arm, kind, found
                )
    return {"points": points, "missing": ""}


def run_label(run: Run) -> dict[str, Any]:
    fraction = _trace_of(run).get("sample_fraction", 1.0)
    return {"run": run.pk, "gate": run.gate.kind, "attempt": run.attempt, "sample": fraction}


def cell_points(
    label: Mapping[str, Any],
    kv_plan: Mapping[str, Any],
    offload_gib: float,
    tier: int,
    arm: str,
    kind: str,
    rates: Mapping[str, list[float]],
) -> list[dict[str, Any]]:
    """The cell's points (pure): its mean GPU rate at the GPU pool, and for an offload arm
    its GPU and tier hits together at the DRAM tier; none when the plan cannot place them."""
    try:
        result = planner.plan(planner.request_from_dict({**kv_plan, "concurrency": tier}))
        sizes = sizes_from_plan(result.to_dict(), {})
    except planner.PlannerError:
        return []
    gpu_rates, external = rates.get("gpu") or [], rates.get("external") or []
    base = {**label, "arm": arm, "tier": tier, "repetitions": max(len(gpu_rates), len(external))}
    points = []
    gpu = sum(gpu_rates) / len(gpu_rates) if gpu_rates else None
    if gpu is not None and kind != "recompute":
        points.append({**base, "kind": "gpu", "capacity_tokens": sizes.gpu_tokens, "hit": gpu})
    if kind == "offload" and external and offload_gib > 0:
        e = sum(external) / len(external)
        dram = int(offload_gib * GIB // sizes.kv_bytes_per_token)
        g = gpu or 0.0
        capacity = max(sizes.gpu_tokens, dram)
        points.append(
            {**base, "kind": "tiers", "capacity_tokens": capacity, "hit": g + e * (1 - g)}
        )
    return points


def _replayed_cells(run: Run, sha256: str) -> dict[tuple[str, int], str]:
    """The (arm, tier) cells of the run that replayed this trace, with each arm's kind."""
    document = run.spec.document
    if document.get("gate") == "G3":
        if _trace_of(run).get("sha256") != sha256:
            return {}
        return {
            (arm, int(tier)): kind
            for arm, kind in document["arms"].items()
            for tier in document["tiers"]
        }
    hit = document.get("offload_hit") or {}
    trace = (hit.get("workload") or {}).get("trace") or {}
    return {(HIT_ARM, int(hit["tier"])): "offload"} if trace.get("sha256") == sha256 else {}


def _trace_of(run: Run) -> dict[str, Any]:
    document = run.spec.document
    part = document if document.get("gate") == "G3" else document.get("offload_hit") or {}
    return (part.get("workload") or {}).get("trace") or {}


def _cell_rates(runs: Iterable[Run]) -> dict[tuple[int, str, int], dict[str, list[float]]]:
    """Each cell's per-repetition GPU and external hit rates, in one query."""
    found: dict[tuple[int, str, int], dict[str, list[float]]] = defaultdict(
        lambda: {"gpu": [], "external": []}
    )
    rows = Measurement.objects.filter(run__in=list(runs)).values_list(
        "run_id", "arm", "tier", "server"
    )
    for run_id, arm, tier, server in rows:
        server = server or {}
        for key, name in (("gpu", "prefix_cache_hit_rate"), ("external", "external_hit_rate")):
            value = server.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                found[(run_id, arm, tier)][key].append(float(value))
    return found


def _offload_gib(run: Run) -> float:
    """The offload tier's size: the spec's server.offload_gib, else the run's profile's."""
    server = run.spec.document.get("server") or {}
    parameters = (run.profile_snapshot or {}).get("parameters") or {}
    value = server.get("offload_gib", parameters.get("offload_gib"))
    return float(value) if value is not None else 0.0
