"""G2 on the customer's own trace, end to end: the shipped Mooncake trace uploaded to the
engagement and named in the spec is replayed by G2's hit cell and its A/A pairs against simhost
over a real sshd, through to the decision: each replay faithful, the same bytes in every cell,
the hit cell's external hit rate against the planner's band in the advisory replay_band row,
and the evidence bundle verified offline."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates import services
from gates.demo.trace import TTFT_METRIC
from gates.evidence import bundle_for_decision
from gates.evidence.verify import verify_bundle
from gates.models import Measurement
from tests.runners.program.test_gate_programs import drive, pass_gate, start, tasks_run_here
from tests.runners.program.trace_replays import KV_PLAN, sim_host, trace_workload, upload_trace
from tests.simhosts import g2_spec

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
__all__ = ["sim_host", "tasks_run_here"]

# The replay's tier: a cap on requests in flight above the replay's 148, so none waits in the
# client; one replay is built for the hit cell and the A/A pairs alike.
TIER = 256


def trace_g2_spec(sha256: str) -> dict:
    document = g2_spec()
    workload = trace_workload(sha256)
    document["offload_hit"].update(workload=workload, tier=TIER)
    # The G3 replay of this sample measured 0.17-0.18 external hits a repetition.
    document["offload_hit"]["min_external_hit_rate"] = 0.1
    document["noise_floor"].update(workload=workload, tier=TIER, metric=TTFT_METRIC)
    document["server"] = {"offload_gib": 256.0}  # the compact scenario's offload tier
    return document


def test_g2_replays_the_customers_trace_and_puts_its_hit_rate_against_the_band(
    client, actor, vendor_viewer, engagement, sim_host
):
    trace = upload_trace(actor, engagement)
    # The emulated host's KV plan, as the vendor saves it on the planner page.
    services.engagement_kv_plan_save(
        actor=actor, viewer=vendor_viewer, engagement=engagement, inputs=KV_PLAN
    )
    pass_gate(actor, vendor_viewer, engagement, "G1", sim_host)
    run = drive(
        start(actor, vendor_viewer, engagement, "G2", sim_host, trace_g2_spec(trace.sha256))
    )
    assert run.outcome == "completed", run.log
    decision = run.gate.decisions.first()
    measurements = Measurement.objects.filter(run=run).order_by("pk")
    means = [(m.arm, m.repetition, round(m.metrics["ttft_ms"]["mean"])) for m in measurements]
    assert decision.verdict == "pass", (decision.result["reasons"], means)
    rows = {row["check"]: row for row in decision.clauses}
    assert rows["offload_hit"]["verdict"] == "pass", rows["offload_hit"]
    # Every replayed cell (the hit cell and four A/A pairs) sent the same bytes, faithfully.
    fidelity = decision.result["replay_fidelity"]
    assert fidelity["reasons"] == [], fidelity
    assert len(fidelity["digests"]) == 1 and len(fidelity["cells"]) == 9
    assert all(cell["valid"] for cell in fidelity["cells"])
    assert sorted(m.arm for m in measurements) == ["aa_a"] * 4 + ["aa_b"] * 4 + ["offload_hit"]
    for measurement in measurements:
        assert measurement.metrics["replay"]["fidelity"]["valid"] is True
        assert measurement.artifact.tool == "replay-records"
    # The advisory row: the hit cell's external hit rate against the band the planner drew
    # from the replayed sample's own curve and the saved KV plan; never the verdict.
    band = rows["replay_band"]
    assert band["advisory"] is True and band["band_tier"] == TIER, band
    assert "band_low" in band, band["cause"]  # a band, not why there is none
    assert band["external_hit_rate"] == rows["offload_hit"]["external_hit_rate"] > 0.1
    assert band["verdict"] in ("pass", "inconclusive"), band
    # Its evidence bundle verifies offline, every replayed cell's fidelity recomputed.
    report = verify_bundle(bundle_for_decision(decision)[0])
    assert report.ok, report.problems
    client.force_login(actor.user)
    html = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    section = html[html.index('id="run-replay-fidelity"') :]
    assert section.count("faithful</span>") == 9
