"""Turning what a run recorded into a verdict: the facts, observations and measurements the
decision engine reads, gathered from the run's steps, the facts it needs beyond them (the KV
planner's), and the decision it records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gates.decisions import decide_gate
from gates.models import Run
from gates.planner.spec_check import spec_workload_exceeds_vram
from gates.selectors import spec_operating_characteristic
from gates.services.attempts import g3_decision_context
from gates.services.runs import GateNotRunnableError, decision_record
from runners.plans import AA_ARMS, HIT_ARM


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
    plan = result.get("plan", {})
    if plan.get("action") == "run" and plan.get("more", 0) > 0:
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


def run_decision_context(run: Run) -> dict:
    """Facts the decision engine needs beyond the measurements (the KV planner's verdict)."""
    exceeds = spec_workload_exceeds_vram(run.gate.engagement, run.spec.document)
    context = {"kv_exceeds_vram": exceeds}
    if run.spec.document["gate"] == "G3":
        context.update(g3_decision_context(run.gate))
    return context


def run_g3_measurements(run: Run) -> list[dict]:
    return [
        {
            "arm": m.arm,
            "tier": m.tier,
            "repetition": m.repetition,
            "metrics": m.metrics,
            "server": m.server,
            "raw_sha256": m.artifact.sha256 if m.artifact else None,
        }
        for m in run.measurements.select_related("artifact").order_by("repetition", "tier", "arm")
    ]


def run_g1_facts(run: Run) -> dict:
    """Every probe's facts, the first observed value of each winning."""
    facts: dict = {}
    for name, value in _all_facts(run):
        if value is not None and facts.get(name) is None:
            facts[name] = value
    inventory = facts.get("gpu_inventory")
    # rocm-smi/amd-smi JSON carries no ROCm version; a separate probe reads it.
    if inventory and not inventory.get("rocm_version") and facts.get("rocm_version"):
        facts["gpu_inventory"] = {**inventory, "rocm_version": facts["rocm_version"]}
    facts.pop("rocm_version", None)
    return facts


def run_g2_observed(run: Run) -> dict:
    facts = dict(_all_facts(run))
    reference = facts.get("answers_resident", [])
    offload = facts.get("answers_offload", [])
    healthy_after = _offload_healthy_after(run, facts)
    hit = run.measurements.filter(arm=HIT_ARM).first()
    prompts = run.spec.document["equivalence"]["prompts"]
    return {
        "health": {"healthy": healthy_after is not None, "seconds": healthy_after},
        "equivalence": [
            {
                "prompt": i,
                "reference": reference[i] if i < len(reference) else None,
                "offload": offload[i] if i < len(offload) else None,
            }
            for i in range(len(prompts))
        ],
        "external_hit_rate": (hit.server or {}).get("external_hit_rate") if hit else None,
        "aa_pairs": _aa_pairs(run),
    }


# What each engine reads, per gate kind; G4's soak windows come with its program.
EVIDENCE: dict[str, Callable[[Run], object]] = {
    "G1": run_g1_facts,
    "G2": run_g2_observed,
    "G3": run_g3_measurements,
}


def _all_facts(run: Run) -> list[tuple[str, object]]:
    return [
        (name, value)
        for detail in run.steps.order_by("position").values_list("detail", flat=True)
        for name, value in detail.get("facts", {}).items()
    ]


def _offload_healthy_after(run: Run, facts: dict) -> float | None:
    for detail in run.steps.order_by("position").values_list("detail", flat=True):
        step = detail.get("step", {})
        if step.get("kind") == "serve" and step.get("arm_kind") == "offload":
            return detail.get("progress", {}).get("healthy_after_s")
    return facts.get("offload_healthy_after_s")


def _aa_pairs(run: Run) -> list[dict]:
    a, b = AA_ARMS
    rows = {(m.arm, m.repetition): m.metrics for m in run.measurements.filter(arm__in=AA_ARMS)}
    repetitions = sorted({r for _, r in rows})
    return [
        {"repetition": r, "a": rows[(a, r)], "b": rows[(b, r)]}
        for r in repetitions
        if (a, r) in rows and (b, r) in rows
    ]
