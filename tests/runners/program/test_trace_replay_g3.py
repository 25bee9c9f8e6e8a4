"""G3 on the customer's own trace, end to end: a Mooncake trace uploaded to the engagement and
named in the spec is replayed on every arm against simhost over a real sshd, the same bytes on
each, its per-request records become the cells' measurements, and each replay's fidelity is
checked and shown beside the decision."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.evidence import bundle_for_decision
from gates.evidence.verify import verify_bundle
from gates.models import Artifact, Measurement
from gates.planner.trace_tiers import replay_hit_bands
from tests.runners.program.test_gate_programs import drive, pass_gate, start, tasks_run_here
from tests.runners.program.trace_replays import sim_host, trace_workload, upload_trace
from tests.simhosts import g1_spec, g3_spec

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
__all__ = ["sim_host", "tasks_run_here"]
KV_PLAN = {
    "model": "llama-3.1-8b",
    "gpus": 1,
    "gpu_mem_gib": 80,
    "concurrency": 256,
    "context_tokens": 8000,
}


def trace_spec(sha256: str) -> dict:
    # A down-sampled replay: 148 requests over three seconds.
    workload = trace_workload(sha256)
    clauses = [
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 1,
            "tiers": "all",
        }
    ]
    document = g3_spec(workload=workload, tiers=[256], repetitions=(4, 4), clauses=clauses)
    # The compact test scenario's 65k-token VRAM keeps more of this down-sampled trace's
    # sessions than the old 49k one did: measured 0.17-0.18 external hits a repetition.
    document["validity"]["min_external_hit_rate"] = 0.1
    return document


def test_g3_replays_the_customers_trace_on_every_arm_and_checks_its_fidelity(
    client, actor, vendor_viewer, engagement, sim_host
):
    trace = upload_trace(actor, engagement)
    # A real G1, so the planner knows the GPUs (its accepted inventory), and a saved KV plan
    # naming a model it can run: what the replay's TTFT band is predicted on.
    g1 = drive(start(actor, vendor_viewer, engagement, "G1", sim_host, g1_spec()))
    assert g1.gate.decisions.first().verdict == "pass", g1.log
    type(engagement).objects.filter(pk=engagement.pk).update(kv_plan=KV_PLAN)
    pass_gate(actor, vendor_viewer, engagement, "G2", sim_host)
    run = drive(start(actor, vendor_viewer, engagement, "G3", sim_host, trace_spec(trace.sha256)))
    assert run.outcome == "completed", run.log
    decision = run.gate.decisions.first()
    fidelity = decision.result["replay_fidelity"]
    assert fidelity["reasons"] == [], fidelity
    assert decision.verdict in ("pass", "fail", "inconclusive"), decision.result["reasons"]
    # Every arm and repetition sent the same replay, byte for byte.
    assert len(fidelity["digests"]) == 1 and len(fidelity["cells"]) == 12
    measurements = Measurement.objects.filter(run=run)
    assert measurements.count() == 12
    built = run.steps.get(name="build and upload the trace replay").detail["progress"]
    (planned,) = built["replays"].values()
    for measurement in measurements:
        metrics = measurement.metrics
        assert metrics["failed"] == 0 and metrics["completed"] > 0
        assert metrics["num_prompts"] + metrics["warmup_requests"] == planned["requests"]
        assert metrics["ttft_ms"]["median"] > 0 and metrics["output_throughput"] > 0
        assert metrics["replay"]["fidelity"]["valid"] is True
        assert measurement.artifact.tool == "replay-records"
    hits = {m.arm: m.server["prefix_cache_hit_rate"] for m in measurements if m.repetition == 1}
    assert not hits["recompute"] and hits["offload"] > 0  # recompute caches nothing: no rate
    assert Artifact.objects.filter(run=run, tool="replay-plan").count() == 1
    # The GPU hit band of this down-sample is read off the curve its replay step drew of the
    # sample the tier kept, not refused for being a sample.
    sampled = run.spec.document["workload"]["trace"]
    (band,) = replay_hit_bands({256: planned["sample_profile"]}, KV_PLAN, sampled).values()
    assert fidelity["hit_band_missing"] == [] and fidelity["hit_bands"] == [[256, list(band)]]
    caching = [cell for cell in fidelity["cells"] if not cell["cell"].startswith("recompute")]
    assert len(caching) == 8 and all(cell["hit_rate"]["band"] == list(band) for cell in caching)
    # The planner ran the same replay through simhost's engine: a TTFT band per arm, and the
    # offload cell's measured p50 against it (advisory: the verdict above is the clauses').
    (predicted,) = decision.result["inputs"]["context"]["replay_ttft_predictions"]
    assert predicted["tier"] == 256 and "arms" in predicted, predicted
    assert predicted["kept"] == planned["requests"] and not predicted["capped"]
    (row,) = decision.result["replay_ttft_bands"]
    assert row["position"] in ("within", "below", "above") and len(row["ttft_p50_ms"]) == 4, row
    # ... and the TTFT change the clauses judge, from the same runs paired by seed and clock
    assert set(predicted["changes"]) == {"offload/resident", "offload/recompute"}, predicted
    assert set(predicted["metric_changes"]) == {"ttft_mean", "ttft_p90", "ttft_p99"}, predicted
    changes = decision.result["replay_ttft_changes"]
    assert changes and all(len(change["ratios"]) == 4 for change in changes), changes
    assert [change["metric"] for change in changes] == ["ttft_p50"], changes  # the clause's
    assert all(change["position"] in ("within", "below", "above") for change in changes)
    # Its evidence bundle verifies offline, every replayed cell's fidelity recomputed.
    report = verify_bundle(bundle_for_decision(decision)[0])
    assert report.ok, report.problems
    # The run page shows each cell's fidelity.
    client.force_login(actor.user)
    html = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    section = html[html.index('id="run-replay-fidelity"') :]
    assert section.count("faithful</span>") == 12 and "offload c=256 r4" in section
