"""What a characterised trace predicts for a deployment: the hit share per tier (VRAM, DRAM,
SSD) read off its LRU hit-ratio curve, and a TTFT-saving band. Pure: the trace's figures and
the plan in, numbers out; replaces the planner's single `reuse` number when a trace exists.

Tiers are inclusive (vLLM's offload connectors write every block through), so with one LRU
order the GPU serves F(C_gpu), DRAM adds F(C_dram) - F(C_gpu), SSD F(C_ssd) - F(C_dram)
(docs/workloads.md §4). The GPU's capacity is a band: the KV of requests in flight cannot be
evicted, so its cache holds between C_gpu - in-flight demand and C_gpu tokens.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gates import figures
from gates.planner import MIN_OFFLOAD_SAVING_SHARE, plan, request_from_dict
from gates.planner.architectures import PlannerError, check
from gates.planner.capacity import GIB

GB = 10**9


@dataclass(frozen=True)
class TierSizes:
    """The deployment's tiers per replica: VRAM KV pool and in-flight demand in tokens (the
    planner computes both), DRAM and SSD in GiB, the links in GB/s, and the prefill rate the
    TTFT band is measured against (None: no band)."""

    gpu_tokens: int
    in_flight_tokens: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    dram_gib: float = 0.0
    ssd_gib: float = 0.0
    link_gbps: float = 25.0  # host DRAM -> one GPU (PCIe 4 x16 in practice)
    ssd_gbps: float = 7.0  # one NVMe drive, shared by the replica's GPUs
    prefill_tokens_per_s: float | None = None


@dataclass(frozen=True)
class TierShare:
    tier: str
    capacity_tokens: int
    low: float  # share of input tokens this tier serves, at the largest GPU cache
    high: float  # ... at the smallest (more spills to the tiers below)


@dataclass(frozen=True)
class TracePrediction:
    ceiling: float
    tiers: tuple[TierShare, ...]
    offload_share: tuple[float, float]
    ttft_saving: dict[str, float] | None
    notes: tuple[str, ...]
    recommendation: str = "offload_will_not_help"
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tiers"] = [asdict(tier) for tier in self.tiers]
        data["offload_share"] = list(self.offload_share)
        data["notes"] = list(self.notes)
        return data


def hit_ratio(curve: Sequence[Sequence[float]], capacity_tokens: float) -> float:
    """F(C) read off the stored curve: the value at the largest point at or below C, a lower
    bound (F never falls as C grows); past the last point, the ceiling is reached."""
    capacities = [point[0] for point in curve]
    index = bisect.bisect_right(capacities, capacity_tokens)
    return float(curve[index - 1][1]) if index else 0.0


def predict_tiers(profile: Mapping[str, Any], sizes: TierSizes) -> TracePrediction:
    """The hit share per tier and the TTFT-saving band; a load-shape trace is refused."""
    curve = profile.get("hit_ratio_curve") or []
    check(
        bool(profile.get("prefix_information")), "trace", "load shape only, no prefix information"
    )
    check(sizes.gpu_tokens >= 0 and sizes.in_flight_tokens >= 0, "gpu_tokens", "not negative")
    check(sizes.dram_gib >= 0 and sizes.ssd_gib >= 0, "dram_gib", "sizes are not negative")
    check(sizes.link_gbps > 0 and sizes.ssd_gbps > 0, "link_gbps", "bandwidths are positive")
    gpu_high = sizes.gpu_tokens
    gpu_low = max(0, gpu_high - sizes.in_flight_tokens)
    # Inclusive tiers: each holds its own size in tokens, the blocks above it included.
    dram = _tokens(sizes.dram_gib, sizes.kv_bytes_per_token)
    ssd = _tokens(sizes.ssd_gib, sizes.kv_bytes_per_token)
    shares = {gpu: _shares(curve, gpu, dram, ssd) for gpu in (gpu_low, gpu_high)}
    tiers = tuple(
        TierShare(name, capacity, *sorted((shares[gpu_high][i], shares[gpu_low][i])))
        for i, (name, capacity) in enumerate((("gpu", gpu_high), ("dram", dram), ("ssd", ssd)))
    )
    offload = sorted(sum(shares[gpu][1:]) for gpu in (gpu_low, gpu_high))
    recommendation, reason = _recommend(offload[1])
    return TracePrediction(
        ceiling=float(profile.get("infinite_cache_hit_ratio") or 0.0),
        tiers=tiers,
        offload_share=(offload[0], offload[1]),
        ttft_saving=_ttft_band(shares, sizes),
        notes=_notes(profile, sizes),
        recommendation=recommendation,
        reason=reason,
    )


def _recommend(best_offload_share: float) -> tuple[str, str]:
    """The planner's rule, with the trace's own offload share in place of a guessed reuse: a
    joint test is worth booking only if the tiers can serve MIN_OFFLOAD_SAVING_SHARE of input
    tokens at the top of the band."""
    if best_offload_share >= MIN_OFFLOAD_SAVING_SHARE:
        return "offload_worth_testing", (
            f"The offload tiers would serve up to {best_offload_share:.0%} of this trace's input "
            f"tokens (at least {MIN_OFFLOAD_SAVING_SHARE:.0%} makes a joint test worth it)."
        )
    return "offload_will_not_help", (
        f"The offload tiers would serve at most {best_offload_share:.0%} of this trace's input "
        f"tokens, under the {MIN_OFFLOAD_SAVING_SHARE:.0%} that makes a joint test worth it: "
        "what it reuses fits in the GPU, or it reuses too little."
    )


def _tokens(gib: float, bytes_per_token: int) -> int:
    return int(gib * GIB // bytes_per_token) if bytes_per_token else 0


def _shares(curve: Sequence[Sequence[float]], gpu: int, dram: int, ssd: int) -> list[float]:
    """[GPU, DRAM, SSD] hit shares with a GPU cache of `gpu` tokens (a tier of size 0 adds 0)."""
    f_gpu, f_dram, f_ssd = (hit_ratio(curve, c) for c in (gpu, max(gpu, dram), max(gpu, ssd)))
    return [f_gpu, max(0.0, f_dram - f_gpu), max(0.0, f_ssd - max(f_gpu, f_dram))]


def _ttft_band(shares: Mapping[int, list[float]], sizes: TierSizes) -> dict[str, float] | None:
    """The share of the resident arm's prefill time the offload tiers save: prefill of the hit
    tokens against their transfer, exposed (low) or overlapped layer by layer (high).

    Per token: prefill costs 1/R seconds; loading it costs its per-GPU shard over the GPU's
    link from DRAM, or the whole token over the replica's shared SSD link."""
    rate = sizes.prefill_tokens_per_s
    if not rate:
        return None
    dram_s = sizes.kv_bytes_per_token_per_gpu / (sizes.link_gbps * GB)
    ssd_s = sizes.kv_bytes_per_token / (sizes.ssd_gbps * GB) + dram_s
    lows, highs = [], []
    for _, dram_hit, ssd_hit in shares.values():
        compute = dram_hit + ssd_hit  # prefill skipped, in units of n/R
        transfer = rate * (dram_hit * dram_s + ssd_hit * ssd_s)
        lows.append(compute - transfer)
        highs.append(1.0 - max(1.0 - compute, transfer))
    return {
        "low": min(lows),
        "high": max(highs),
        "seconds_per_prefill_token_dram": dram_s,
        "seconds_per_prefill_token_ssd": ssd_s,
        "seconds_per_token_prefill": 1.0 / rate,
    }


def _notes(profile: Mapping[str, Any], sizes: TierSizes) -> tuple[str, ...]:
    notes = [
        "LRU with prefix semantics, read off the curve at or below each capacity (a lower "
        "bound); another eviction policy, 16-token engine blocks or several replicas change it."
    ]
    if sizes.dram_gib == 0 and sizes.ssd_gib == 0:
        notes.append("No DRAM or SSD size given: every offload share is 0.")
    if sizes.prefill_tokens_per_s:
        notes.append(
            "The TTFT-saving band here is a cruder estimate than a G3 run's (gates.planner."
            "run_band, simhost's engine): one prefill rate and the hit shares, no queueing, "
            "batching or shared links, because a trace's sessions do not fit the engine's "
            "warm-flush-resume workload. Read it as a share of prefill time, not a TTFT p50 change."
        )
    if (profile.get("measured_from_request") or 0) == 0:
        notes.append("Measured over every request, cold cache included.")
    return tuple(notes)


def sizes_from_plan(plan: Mapping[str, Any], tiers: Mapping[str, Any]) -> TierSizes:
    """TierSizes from a PlanResult's dict (planner.plan) and the tier inputs."""
    per_token_gpu = int(plan["kv_bytes_per_token_per_gpu"])
    check(per_token_gpu > 0, "kv_plan", "the plan has no KV bytes per token")
    try:
        return TierSizes(
            gpu_tokens=int(plan["kv_capacity_per_gpu_bytes"]) // per_token_gpu,
            # One replica's sequences in flight (demand per GPU is already per replica).
            in_flight_tokens=int(plan["kv_demand_per_gpu_bytes"]) // per_token_gpu,
            kv_bytes_per_token=int(plan["kv_bytes_per_token"]),
            kv_bytes_per_token_per_gpu=per_token_gpu,
            **{name: float(value) for name, value in tiers.items() if value is not None},
        )
    except (TypeError, ValueError) as error:
        raise PlannerError("tiers", str(error)) from None


def replay_hit_bands(
    profiles: Mapping[int, Mapping[str, Any] | None],
    kv_plan: Mapping[str, Any] | None,
    trace: Mapping[str, Any],
) -> dict[int, tuple[float, float] | str]:
    """Per concurrency tier of a replay of the trace, read off that tier's hit curve (the
    trace's; a down-sampled replay's, the sample that tier kept, since each tier's seed draws
    its own): the band its GPU prefix cache hit rate (vLLM's prefix_cache_hit_rate) should fall
    in, the 'gpu' tier's share of input tokens with the saved plan's KV capacity and that
    tier's in-flight demand; or why there is none."""
    bands: dict[int, tuple[float, float] | str] = {}
    for concurrency, profile in profiles.items():
        reason = _no_hit_band(profile, kv_plan, trace)
        if reason is not None:
            bands[concurrency] = reason
            continue
        assert profile is not None and kv_plan is not None  # else _no_hit_band said why
        try:
            result = plan(request_from_dict({**kv_plan, "concurrency": concurrency}))
            gpu = predict_tiers(profile, sizes_from_plan(result.to_dict(), {})).tiers[0]
        except PlannerError as error:
            bands[concurrency] = f"the saved KV plan does not plan c={concurrency}: {error}"
            continue
        bands[concurrency] = (gpu.low, gpu.high)
    return bands


def replay_external_band(
    profile: Mapping[str, Any] | None,
    kv_plan: Mapping[str, Any] | None,
    trace: Mapping[str, Any],
    *,
    concurrency: int,
    offload_gib: float | None,
) -> tuple[float, float] | str:
    """The band a replay's external (offload tier: DRAM + SSD) hit rate should fall in at this
    concurrency tier, with the saved plan replanned there and `offload_gib` of DRAM; or why
    there is none.

    The engine counts external hits over what it asks the tier for, the tokens its own GPU
    cache missed (vLLM's scheduler and simhost: queries = prompt - local hits), so each end is
    the offload share over the GPU's miss share at the same GPU cache size: the smallest GPU
    cache (most offload share) pairs with the lowest GPU share."""
    reason = _no_hit_band(profile, kv_plan, trace)
    if reason is None and not offload_gib:
        reason = "the spec does not state the offload tier's size (server.offload_gib)"
    if reason is not None:
        return reason
    assert profile is not None and kv_plan is not None  # else _no_hit_band said why
    try:
        result = plan(request_from_dict({**kv_plan, "concurrency": concurrency}))
        sizes = sizes_from_plan(result.to_dict(), {"dram_gib": offload_gib})
        prediction = predict_tiers(profile, sizes)
    except PlannerError as error:
        return f"the saved KV plan does not plan c={concurrency}: {error}"
    gpu, (offload_low, offload_high) = prediction.tiers[0], prediction.offload_share
    ends = ((gpu.low, offload_high), (gpu.high, offload_low))
    if any(gpu_share >= 1.0 for gpu_share, _ in ends):
        return "the GPU cache holds all the trace reuses: nothing is asked of the offload tier"
    rates = sorted(offload / (1.0 - gpu_share) for gpu_share, offload in ends)
    return (rates[0], rates[1])


def _no_hit_band(
    profile: Mapping[str, Any] | None, kv_plan: Mapping[str, Any] | None, trace: Mapping[str, Any]
) -> str | None:
    if not profile:
        return "the trace's characterisation is not ready"
    if not profile.get("prefix_information"):
        return "the trace has no prefix information (load shape only)"
    if not kv_plan:
        return "the engagement has no saved KV plan (planner page), so the GPU cache is unknown"
    fraction = float(trace.get("sample_fraction", 1.0))
    if fraction < 1.0 and profile.get("sample_fraction") != fraction:
        # Sampling keeps whole sessions but fewer of them: less pressure on the same cache,
        # a curve the characterisation of the whole trace does not have (the replay step
        # characterises the kept sample: runners.traces.replay_cell.sample_hit_profile).
        return (
            f"the replay sends {figures.share(fraction)} of the trace's sessions; the "
            "characterisation's hit curve is the whole trace's"
        )
    return None
