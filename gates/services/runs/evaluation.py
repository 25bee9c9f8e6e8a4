"""Turning what a run recorded into a verdict: the facts, observations and measurements the
decision engine reads, gathered from the run's steps, the facts it needs beyond them (the KV
planner's; a replayed G2 hit cell's or G3 offload cells' hit-rate and TTFT bands), and the
decision it records; a trace replay's fidelity beside it, its hit rates against the band."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gates.decisions import decide_gate, gathering
from gates.models import Run, WorkloadTrace
from gates.planner.spec_check import spec_workload_exceeds_vram
from gates.planner.trace_tiers import replay_external_band, replay_hit_bands
from gates.selectors import run_measurement_records, spec_operating_characteristic
from gates.services.runs.attempts import g3_decision_context
from gates.services.runs.carrying import run_carried_records
from gates.services.runs.lifecycle import GateNotRunnableError, decision_record
from gates.services.runs.replay_ttft import g3_ttft_predictions
from gates.services.runs.step_facts import run_g1_facts, run_steps
from runners.traces.fidelity import replay_fidelity_summary, with_replay_fidelity
from runners.traces.replay_cell import replay_name


@dataclass
class Evaluation:
    """The engine's answer: a decision was recorded, or `more` repetitions from `first`."""

    decided: bool
    verdict: str | None = None
    more: int = 0
    first: int = 0


def run_evaluate(run: Run) -> Evaluation:
    """Ask the decision engine; record its decision, or say how many repetitions more."""
    spec = run.spec.document
    gather = EVIDENCE.get(spec["gate"])
    if gather is None:
        raise GateNotRunnableError(f"no evidence is gathered for {spec['gate']} runs", field="gate")
    result = decide_gate(spec, gather(run), run_decision_context(run))
    fidelity = run_replay_fidelity(run)
    if fidelity is not None:
        result = with_replay_fidelity(result, fidelity)
    plan = result.get("plan", {})
    # A replay that missed its bars decides the run now: more repetitions would not mend it.
    missed = fidelity is not None and bool(fidelity["reasons"])
    if not missed and plan.get("action") == "run" and plan.get("more", 0) > 0:
        seen = max(result["inputs"]["repetitions_seen"], default=0)
        return Evaluation(decided=False, more=plan["more"], first=seen + 1)
    if spec["gate"] == "G3":
        # Into the evidence: what this spec could decide at the noise known when it decided.
        result = {
            **result,
            "operating_characteristic": spec_operating_characteristic(run.spec, run.gate),
        }
    decision = decision_record(run_id=run.pk, result=result)
    return Evaluation(decided=True, verdict=decision.verdict if decision else None)


def run_replay_fidelity(run: Run) -> dict | None:
    """Each replayed cell's fidelity with its achieved hit rate against the planner's band for
    its tier (docs/workloads.md section 9); None for a run that sent no trace replay."""
    records = run_measurement_records(run)
    if not any("replay" in (record.get("metrics") or {}) for record in records):
        return None
    tiers = sorted({int(record["tier"]) for record in records})
    return replay_fidelity_summary(records, _replay_hit_bands(run, tiers))


def _replay_hit_bands(run: Run, tiers: list[int]) -> dict[int, tuple[float, float] | str]:
    document = run.spec.document
    if document.get("gate") != "G3":  # G2's two workloads may replay two traces at one tier
        # (its hit cell's external hit rate has its own band: g2_external_band)
        return dict.fromkeys(tiers, "hit-rate bands are predicted for G3 replays only")
    workload = document.get("workload") or {}
    trace = workload.get("trace") or {}
    profiles = _tier_profiles(run, workload, tiers)
    missing = {tier: why for tier, why in profiles.items() if isinstance(why, str)}
    curves = {tier: curve for tier, curve in profiles.items() if not isinstance(curve, str)}
    bands = {**missing, **replay_hit_bands(curves, run.gate.engagement.kv_plan, trace)}
    return dict(sorted(bands.items()))


def _tier_profiles(run: Run, workload: dict, tiers: list[int]) -> dict[int, dict | str | None]:
    """The hit curve each tier of a replayed workload is read off: the trace's characterisation
    (None while it is not ready), read once for every tier so a page costs the same queries
    with one tier or three; for a down-sampled replay, the curve its replay step drew of the
    sample that tier kept (each tier's seed draws its own sample), else why there is none."""
    trace = workload.get("trace") or {}
    if float(trace.get("sample_fraction", 1.0)) >= 1.0:
        return dict.fromkeys(tiers, _trace_profile(run, trace))
    steps = run_steps(run)
    return {tier: _sample_profile_or_why(steps, workload, tier) for tier in tiers}


def _sample_profile_or_why(steps: list[dict], workload: dict, tier: int) -> dict | str:
    sample = _sample_profile(steps, workload, tier)
    if sample is None:
        return (
            f"the replay's sample was not characterised at c={tier} (its replay step did not "
            "record it)"
        )
    return sample


def _trace_profile(run: Run, trace: dict) -> dict | None:
    ready = WorkloadTrace.objects.filter(
        engagement_id=run.gate.engagement_id,
        sha256=trace.get("sha256"),
        state=WorkloadTrace.State.READY,
    )
    return ready.values_list("profile", flat=True).first()  # not the trace's bytes


def g2_external_band(run: Run) -> dict | None:
    """The planner's band for a G2 hit cell's external hit rate when that cell replays a
    trace ({tier, band: [low, high]} or {tier, missing: why}); None for a synthetic hit cell.
    It travels in the decision context, so the offline verifier takes it as recorded."""
    hit = run.spec.document.get("offload_hit") or {}
    workload = hit.get("workload") or {}
    return trace_external_band(run, workload, int(hit["tier"])) if workload.get("trace") else None


def g3_external_bands(run: Run) -> list[dict] | None:
    """Per tier of a G3 that replays a trace, the planner's band for its offload cells'
    external hit rate (as g2_external_band); None for a synthetic workload."""
    document = run.spec.document
    workload = document.get("workload") or {}
    if not workload.get("trace"):
        return None
    tiers = [int(tier) for tier in document["tiers"]]
    profiles = _tier_profiles(run, workload, tiers)
    return [_external_band(run, workload, tier, profiles[tier]) for tier in tiers]


def trace_external_band(run: Run, workload: dict, tier: int) -> dict:
    """The band for one tier of a replayed workload, read off the trace's curve (a down-sampled
    replay: the curve its replay step drew of the kept sample at that tier)."""
    return _external_band(run, workload, tier, _tier_profiles(run, workload, [tier])[tier])


def _external_band(run: Run, workload: dict, tier: int, profile: dict | str | None) -> dict:
    band = (
        profile
        if isinstance(profile, str)
        else replay_external_band(
            profile,
            run.gate.engagement.kv_plan,
            workload["trace"],
            concurrency=tier,
            offload_gib=_offload_gib(run),
        )
    )
    if isinstance(band, str):
        return {"tier": tier, "missing": band}
    return {"tier": tier, "band": list(band)}


def _sample_profile(steps: list[dict], workload: dict, tier: int) -> dict | None:
    name = replay_name(workload, tier)
    for detail in steps:
        # A step's detail is {"step", "progress", ...}; the replay step's summary is its progress.
        built = ((detail or {}).get("progress") or {}).get("replays") or {}
        if isinstance(built.get(name), dict):
            return built[name].get("sample_profile")
    return None


def _offload_gib(run: Run) -> float | None:
    """The offload arm's tier size: the spec's server.offload_gib, else the run's profile's."""
    server = run.spec.document.get("server") or {}
    parameters = (run.profile_snapshot or {}).get("parameters") or {}
    value = server.get("offload_gib", parameters.get("offload_gib"))
    return float(value) if value is not None else None


def run_decision_context(run: Run) -> dict:
    """Facts the decision engine needs beyond the measurements (the KV planner's verdict; for
    G3 which attempt, the G2 noise and the repetitions carried)."""
    exceeds = spec_workload_exceeds_vram(run.gate.engagement, run.spec.document)
    context: dict = {"kv_exceeds_vram": exceeds}
    if run.spec.document["gate"] == "G2":
        band = g2_external_band(run)
        if band is not None:
            context["replay_external_band"] = band
    if run.spec.document["gate"] == "G3":
        context.update(g3_decision_context(run.gate))
        bands = g3_external_bands(run)
        if bands is not None:
            context["replay_external_bands"] = bands
        predictions = g3_ttft_predictions(run, _offload_gib(run))
        if predictions is not None:
            context["replay_ttft_predictions"] = predictions
        if run.carried_repetitions:
            context["carried_repetitions"] = run.carried_repetitions
    return context


def run_g3_measurements(run: Run) -> list[dict]:
    """The run's measurements, after those it carries from an inconclusive attempt."""
    return gathering.gather_g3(run_carried_records(run) + run_measurement_records(run))


def run_g2_observed(run: Run) -> dict:
    return gathering.gather_g2(run.spec.document, run_steps(run), run_measurement_records(run))


# What each engine reads, per gate kind; G4's soak windows come with its program.
EVIDENCE: dict[str, Callable[[Run], object]] = {
    "G1": run_g1_facts,
    "G2": run_g2_observed,
    "G3": run_g3_measurements,
}
