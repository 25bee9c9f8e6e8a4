"""The Mooncake store's profiles end to end: real sshd on loopback, simhost behind it with its
`mooncake-master` double (the master's flags, /health, master_* counters, the HTTP metadata
server) started before the engine on the offload arm and stopped with the session, behind
SGLang HiCache (--hicache-storage-backend mooncake) and behind vLLM (MooncakeStoreConnector)."""

from __future__ import annotations

import pytest

from gates.models import Artifact, Measurement
from tests.runners.program.test_gate_programs import drive, host_processes_gone, start
from tests.simhosts import MOONCAKE_PROFILES, g1_spec, g2_spec, g3_spec, ssh_simhost, use_mooncake

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def tasks_run_here(monkeypatch, settings):
    from gates.services import pokes
    from worker import tasks

    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    # Longer tasks than the other programs' 3 s: three gates of runs fit drive()'s 200 tasks
    # on a loaded box (at 3 s the vLLM one ran out of tasks in G3's third repetition, at load 8).
    settings.TOLLGATE_TASK_BUDGET_S = 6


@pytest.mark.parametrize("profile", MOONCAKE_PROFILES)
def test_a_mooncake_store_host_passes_g1_g2_and_g3_with_the_masters_counters_read(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path, profile
):
    host = use_mooncake(ssh_simhost(customer_org, own_sshd, tmp_path / "host"), profile)
    spec = g1_spec()
    if "sglang" in profile:  # held to its own engine's version (test_sglang_profile.py)
        spec["expect"].update(vllm_min=None, engine_min="0.1")
    # The TTFT clauses only, as the SGLang profile's test does (its throughput straddles).
    clauses = [c for c in g3_spec()["clauses"] if c["metric"] == "ttft_p50"]
    for kind, document in (("G1", spec), ("G2", g2_spec()), ("G3", g3_spec(clauses=clauses))):
        run = drive(start(actor, vendor_viewer, engagement, kind, host, document))
        decision = run.gate.decisions.first()
        assert decision.verdict == "pass", (kind, decision.clauses, run.log[-3000:])
    assert "mooncake healthy" in run.log, run.log[-3000:]
    offload = Measurement.objects.filter(run=run, arm="offload")
    assert offload.exists()
    for measurement in offload:
        facts = measurement.server["side_services"]["mooncake"]
        # The engine's counters prove the hits; the master says the store was used.
        assert measurement.server["hit_proof"] == "engine"
        assert measurement.server["offload_enabled"] is True
        assert facts["metrics_tool"] == "mooncake-metrics" and facts["lookup_hit_rate"] is None
        assert facts["exist_key_items"] > 0 and facts["get_replica_list_items"] > 0
    recompute = Measurement.objects.filter(run=run, arm="recompute").first()
    assert recompute is not None and "side_services" not in recompute.server
    kept = set(
        Artifact.objects.filter(run=run, tool="mooncake-metrics").values_list("name", flat=True)
    )
    assert any(name.endswith("mooncake-metrics-after.txt") for name in kept), kept
    assert host_processes_gone(run)
