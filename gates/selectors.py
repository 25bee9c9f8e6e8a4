"""Reads that pages and the API share: a gate's clause rows and its latest engine decision.
Reads models only; writes nothing (writers are in gates.services).
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from gates import planner
from gates.cache import cache_get_or_compute
from gates.decisions.statistics.operating import operating_characteristic
from gates.decisions.units import clause_comparison, clause_unit
from gates.models import (
    Decision,
    Engagement,
    Gate,
    GateSpec,
    Run,
    SpecSignature,
    Verdict,
    WorkloadTrace,
)
from gates.planner import run_band, trace_tiers
from gates.specs.diff import FieldChange, spec_changes

# Simulated gates per operating characteristic shown: Monte Carlo sd of an 80 % power 0.9 %.
OC_GATES = 20_000  # simulated gates per OC row: sampling error about +-0.3 % at 2.5 %
OC_CACHE_S = 24 * 3600


def gate_latest_decision(gate: Gate) -> Decision | None:
    """The gate's newest decision made by the engine (not a waiver or a stop)."""
    return gate.decisions.filter(kind=Decision.Kind.ENGINE).select_related("spec").first()


def gate_clauses(gate: Gate) -> list[dict]:
    """The rows of the gate's latest engine decision in the API's shape.

    G3 rows are clause x tier cells; G1/G2 rows are checks, named by `metric` too.
    """
    decision = gate_latest_decision(gate)
    return clause_rows(decision.clauses if decision is not None else [])


def gate_replay_bands(gate: Gate, key: str = "replay_bands") -> list[dict]:
    """A replayed G3's latest rows against a planner band (a list in REPLAY_READS)."""
    decision = gate_latest_decision(gate)
    bands = (decision.result or {}).get(key) if decision is not None else None
    return bands if isinstance(bands, list) else []


def gates_with_latest(queryset: QuerySet) -> QuerySet:
    """Gates annotated with their latest spec version, the version in force and their latest
    engine decision, in one query (gate_readout builds the stored read from it)."""
    specs = GateSpec.objects.filter(gate=OuterRef("pk")).order_by("-version")
    decisions = Decision.objects.filter(gate=OuterRef("pk"), kind=Decision.Kind.ENGINE).order_by(
        *Decision._meta.ordering
    )
    in_force = specs.filter(_signed_by("vendor"), _signed_by("customer"))
    latest = {field: Subquery(decisions.values(field)[:1]) for field in LATEST_DECISION_FIELDS}
    return queryset.annotate(
        latest_spec_version=Subquery(specs.values("version")[:1]),
        latest_engine_clauses=Subquery(decisions.values("clauses")[:1]),
        in_force_version=Subquery(in_force.values("version")[:1]),
        **{f"latest_decision_{field.replace('__', '_')}": query for field, query in latest.items()},
    )


# The shape of Gate.readout: bump it when gate_readout or _clause_row changes what they return,
# so readouts stored by an older release are rebuilt on their next read.
READOUT_SHAPE = 9  # 8: latest_decision.replay_fidelity; 9: replay_ttft_changes[].metric


def gate_readout(gate_id: int) -> dict:
    """What a gate read derives from the gate's specs, signatures and latest engine decision,
    in the API's shape; stored on the gate by gates.services.runs.readouts."""
    return readout_of(gates_with_latest(Gate.objects.filter(pk=gate_id)).get())


def readout_of(gate: Gate) -> dict:
    """The readout of a gate annotated by gates_with_latest."""
    return {
        "shape": READOUT_SHAPE,
        "spec_version": gate.latest_spec_version,
        "in_force_version": gate.in_force_version,
        "latest_decision": _decision_brief(gate),
        "clauses": [api_clause(row) for row in clause_rows(gate.latest_engine_clauses or [])],
    }


# A clause row as the API gives it (gates.api.engagements.ClauseSerializer documents it; a test
# holds the two alike): the pages' rows also carry `expected` and `observed`.
API_CLAUSE_TEXT = ("metric", "tiers", "compare", "change", "unit", "comparison", "slo")
API_CLAUSE_NUMBERS = ("threshold", "estimate", "low", "high")


def api_clause(row: dict) -> dict:
    numbers = {key: _float_or_none(row.get(key)) for key in API_CLAUSE_NUMBERS}
    text = {key: row.get(key) for key in API_CLAUSE_TEXT}
    return {**text, **numbers, "verdict": row.get("verdict"), "cause": row.get("cause")}


def _float_or_none(value) -> float | None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if is_number else None


def readout_is_current(readout: dict | None) -> bool:
    return isinstance(readout, dict) and readout.get("shape") == READOUT_SHAPE


def _decision_brief(gate: Gate) -> dict | None:
    """Which version the latest decision used, whether it counted (signed by both at its
    start) and a replayed G3's band rows, from the gate's annotations (gates_with_latest)."""
    if gate.latest_decision_pk is None:
        return None
    # A replayed G3: its cells against the planner's bands (advisory) and each cell's fidelity.
    bands = {key: getattr(gate, f"latest_decision_result_{key}") for key in REPLAY_READS}
    return {
        **{key: rows for key, rows in bands.items() if rows is not None},
        "id": gate.latest_decision_pk,
        "verdict": gate.latest_decision_verdict,
        "rehearsal": gate.latest_decision_rehearsal,
        # A G4 soak under an hour: its verdict is shown as compressed wherever it is shown.
        "compressed": bool(gate.latest_decision_result_soak_compressed),
        "spec_version": gate.latest_decision_spec_version,
        "spec_digest": gate.latest_decision_spec_digest,
        "created_at": gate.latest_decision_created_at.isoformat(),
    }


# What a gate read says of its latest engine decision (which version, whether it counted).
REPLAY_READS = ("replay_bands", "replay_ttft_bands", "replay_ttft_changes", "replay_fidelity")
LATEST_DECISION_FIELDS = (
    "pk",
    "verdict",
    "rehearsal",
    "result__soak__compressed",
    *(f"result__{key}" for key in REPLAY_READS),
    "spec__version",
    "spec__digest",
    "created_at",
)


def _signed_by(party: str) -> Exists:
    """The outer spec version carries `party`'s signature over its own digest."""
    return Exists(
        SpecSignature.objects.filter(spec=OuterRef("pk"), party=party, digest=OuterRef("digest"))
    )


def clause_rows(clauses: list[dict]) -> list[dict]:
    return [_clause_row(clause) for clause in clauses]


def _clause_row(clause: dict) -> dict:
    numbers = {key: clause.get(key) for key in ("estimate", "low", "high")}
    threshold = clause.get("threshold", clause.get("expected"))
    return {
        "metric": clause.get("metric") or clause.get("check"),
        "tiers": clause.get("tiers", clause.get("tier")),
        # G3 cells say what they compare and how, so a CI report can read "TTFT p50 reduction".
        "compare": clause.get("compare"),
        "change": clause.get("change"),
        "threshold": threshold if isinstance(threshold, (int, float)) else None,
        "unit": clause_unit(clause),
        "comparison": clause_comparison(clause),
        # A goodput clause's SLO in words ("TTFT ≤ 2 s and TPOT ≤ 50 ms"); None elsewhere.
        "slo": (clause.get("slo") or {}).get("text"),
        **numbers,
        "verdict": clause.get("verdict"),
        "cause": clause.get("cause"),
        # Checks (G1, G2, G4) state what they wanted and saw; the pages show both.
        "expected": clause.get("expected", clause.get("limit")),
        "observed": clause.get("observed"),
        # A row that never decides the verdict (G2's replay band) and where its number fell.
        "advisory": bool(clause.get("advisory")),
        "position": clause.get("position"),
    }


def engagement_noise_floor(engagement: Engagement) -> dict | None:
    """The passed G2's A/A noise: {metric, sd_log_ratio}, or None before G2 passed."""
    g2 = engagement.gates.filter(kind=Gate.Kind.G2).first()
    decision = g2 and g2.decisions.filter(kind=Decision.Kind.ENGINE, verdict=Verdict.PASS).first()
    if decision is None:
        return None
    row = next((c for c in decision.clauses if c.get("check") == "noise_floor"), None)
    sd = row.get("sd_log_ratio") if row else None
    if not isinstance(sd, (int, float)):
        return None
    return {"metric": decision.spec.document["noise_floor"]["metric"], "sd_log_ratio": float(sd)}


def gate_operating_characteristic(gate: Gate) -> dict | None:
    """What the G3 gate's current spec can decide: the table shown before signing."""
    if gate.kind != Gate.Kind.G3:
        return None
    return spec_operating_characteristic(gate.current_spec, gate)


def spec_operating_characteristic(spec: GateSpec, gate: Gate) -> dict:
    """What a G3 spec can decide at the engagement's G2 A/A noise (or the spec's stated CV),
    with host hours from the gate's last completed run. Cached per spec digest and inputs;
    computed here when the cache is down, so a decision never waits on Redis."""
    noise = engagement_noise_floor(gate.engagement)
    sd = noise["sd_log_ratio"] if noise else None
    hours = gate_hours_per_repetition(gate)
    source = f"the G2 A/A noise of {noise['metric']}" if noise else None

    def compute() -> dict:
        found = operating_characteristic(
            spec.document,
            sd_log_ratio=sd,
            noise_source=source,
            hours_per_repetition=hours,
            gates=OC_GATES,
        )
        return dict(found)  # the plain JSON shape pages, API and evidence read

    return cache_get_or_compute(
        f"tollgate:oc:{spec.digest}:{sd}:{hours}", compute, timeout=OC_CACHE_S
    )


def gate_hours_per_repetition(gate: Gate) -> float | None:
    """Host hours one repetition took in the gate's last completed run (None before one)."""
    run = (
        gate.runs.filter(outcome=Run.Outcome.COMPLETED, started_at__isnull=False)
        .exclude(finished_at=None)
        .order_by("-finished_at")
        .first()
    )
    repetitions = run and run.measurements.values("repetition").distinct().count()
    if not repetitions:
        return None
    return round((run.finished_at - run.started_at).total_seconds() / 3600 / repetitions, 4)


def run_measurement_records(run: Run) -> list[dict]:
    """The run's measurements in cell order, each with its raw result file's name and SHA-256:
    the records an evidence bundle's measurements.json holds and the engine's gathering reads
    (gates.decisions.gathering, which ignores the file's name), so the server's evaluation and
    the offline verifier decide from the same records."""
    rows = run.measurements.select_related("artifact").order_by("repetition", "tier", "arm")
    return [
        {
            "arm": m.arm,
            "tier": m.tier,
            "repetition": m.repetition,
            "metrics": m.metrics,
            "server": m.server,
            "artifact": m.artifact.name if m.artifact else None,
            "raw_sha256": m.artifact.sha256 if m.artifact else None,
        }
        for m in rows
    ]


def gate_cell_readouts(gate: Gate) -> list[dict]:
    """Per G3 cell of the latest decision: the look, the interval on the ratio scale (ends
    beyond the cap said as unbounded) and each repetition's ratio."""
    decision = gate_latest_decision(gate)
    if decision is None or gate.kind != Gate.Kind.G3:
        return []
    return [
        {
            "metric": cell.get("metric"),
            "compare": cell.get("compare"),
            "change": cell.get("change"),
            "tier": cell.get("tier"),
            "verdict": cell.get("verdict"),
            "shown": cell.get("shown"),
            "repetitions": [
                {"repetition": pair.get("repetition"), "ratio": pair.get("ratio")}
                for pair in cell.get("pairs", [])
            ],
        }
        for cell in decision.clauses
    ]


def gate_spec_in_force(gate: Gate) -> GateSpec | None:
    """The newest version both parties signed: the bar counted decisions are held to. One
    query, the same rule the gate read's annotation uses (gates_with_latest)."""
    signed = gate.specs.filter(_signed_by("vendor"), _signed_by("customer"))
    return signed.order_by("-version").first()


def gate_spec_proposed(gate: Gate) -> GateSpec | None:
    """The latest version when it is newer than the one in force (or none is in force yet)."""
    latest = gate.current_spec
    if latest is None or latest.in_force:
        return None
    return latest


def spec_changes_from_force(gate: Gate, spec: GateSpec) -> list[FieldChange]:
    """How `spec` differs from the version in force, field by field (empty if none is)."""
    in_force = gate_spec_in_force(gate)
    if in_force is None or in_force.pk == spec.pk:
        return []
    return spec_changes(in_force.document, spec.document)


def gate_counted_decisions(gate: Gate):
    """Engine decisions that count: not rehearsals, and after the last stop-loss reset."""
    counted = gate.decisions.filter(kind=Decision.Kind.ENGINE, rehearsal=False)
    reset_at = gate_last_reset_at(gate)
    if reset_at is not None:
        counted = counted.filter(created_at__gt=reset_at)
    return counted


def gate_last_reset_at(gate: Gate):
    """When the gate's last stop-loss reset took effect (both signed); None without one."""
    reset = gate.resets.filter(effective_at__isnull=False).order_by("-effective_at").first()
    return None if reset is None else reset.effective_at


def engagement_last_host_id(engagement: Engagement) -> int | None:
    """The host this engagement's latest driven run used: what the run form offers first."""
    runs = Run.objects.filter(gate__engagement=engagement, host__isnull=False)
    return runs.order_by("-created_at", "-id").values_list("host_id", flat=True).first()


TRACE_TIER_INPUTS = ("dram_gib", "ssd_gib", "link_gbps", "ssd_gbps", "prefill_tokens_per_s")


def trace_brief(trace: WorkloadTrace) -> dict:
    """A trace as the API and the engagement page list it (never its content)."""
    return {
        "id": trace.pk,
        "name": trace.name,
        "format": trace.format,
        "block_tokens": trace.block_tokens,
        "sha256": trace.sha256,
        "size": trace.size,
        "requests": trace.requests,
        "state": trace.state,
        "progress": {"done": trace.progress_done, "total": trace.requests},
        "error": trace.error or None,
        "created_at": trace.created_at.isoformat(),
        "spec_reference": _trace_reference(trace),
    }


def trace_readout(trace: WorkloadTrace, tiers: dict) -> dict:
    """The brief, the characterisation once ready, and the planner's per-tier prediction from
    the engagement's saved KV plan and the tier sizes (`tiers`: TRACE_TIER_INPUTS, a missing
    DRAM size taken from the G3 spec's server.offload_gib)."""
    readout = trace_brief(trace) | {"profile": trace.profile, "prediction": None}
    if trace.state != WorkloadTrace.State.READY or not trace.profile:
        return readout
    tiers = {"dram_gib": _g3_offload_gib(trace.engagement)} | {
        name: value for name, value in tiers.items() if value is not None
    }
    readout["tier_inputs"] = tiers
    if not trace.profile.get("prefix_information"):
        readout["prediction_missing"] = trace.profile.get("notice")
    elif not trace.engagement.kv_plan:
        readout["prediction_missing"] = "save the engagement's KV plan (planner page) first"
    else:
        try:
            result = planner.plan(planner.request_from_dict(trace.engagement.kv_plan)).to_dict()
            sizes = trace_tiers.sizes_from_plan(result, tiers)
            readout["prediction"] = trace_tiers.predict_tiers(trace.profile, sizes).to_dict()
        except planner.PlannerError as error:
            readout["prediction_missing"] = f"{error.field}: {error.message}"
    return readout


def _trace_reference(trace: WorkloadTrace) -> dict:
    """What a spec's workload names it by (the `trace` field of the workload schema)."""
    return {"sha256": trace.sha256, "format": trace.format, "block_tokens": trace.block_tokens}


def _g3_offload_gib(engagement: Engagement) -> float:
    gate = engagement.gates.filter(kind=Gate.Kind.G3).first()
    spec = gate.current_spec if gate else None
    server = (spec.document.get("server") if spec else None) or {}
    return float(server.get("offload_gib") or 0.0)


def run_predicted_ttft(run: Run) -> dict | None:
    """A G3 run's predicted TTFT-saving band beside what its engine decision measured, per tier
    (gates.planner.run_band); None for other gates. `state` is "pending" until the worker has
    predicted it, "unknown" (with the reason) when something the model needs is unknown."""
    if run.gate.kind != Gate.Kind.G3:
        return None
    prediction = run.predicted_ttft
    if prediction is None:
        return {"state": "pending", "reason": "not predicted yet", "tiers": []}
    if prediction.get("predicted") is None:
        return {"state": "unknown", "reason": prediction.get("reason", ""), "tiers": []}
    decision = run.decisions.filter(kind=Decision.Kind.ENGINE).first()
    cells = decision.clauses if decision else []
    rows = run_band.measured_against_predicted(prediction, cells)
    return {"state": "predicted", "assumes": prediction.get("assumes", ""), "tiers": rows}
