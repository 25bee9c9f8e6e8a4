"""Dynamo KVBM's profile end to end: real sshd on loopback, simhost behind it taking vLLM's
DynamoConnector and KVBM's environment (DYN_KVBM_CPU_CACHE_GB, DYN_KVBM_METRICS_PORT), its
kvbm_* series on their own port scraped around every offload cell as the tier's hit proof."""

from __future__ import annotations

import pytest

from gates.models import Artifact, Measurement, Profile
from tests.runners.program.test_gate_programs import drive, host_processes_gone, pass_gate, start
from tests.simhosts import free_port, g3_spec, ssh_simhost

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def tasks_run_here(monkeypatch, settings):
    from gates.services import pokes
    from worker import tasks

    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    settings.TOLLGATE_TASK_BUDGET_S = 3


def test_a_kvbm_host_passes_g3_with_kvbms_own_counters_as_the_hit_proof(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host")
    host.profile = Profile.objects.get(name="simhost-kvbm")
    host.parameters = {**host.parameters, "kvbm_metrics_port": free_port()}
    host.save(update_fields=["profile", "parameters"])
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    run = drive(start(actor, vendor_viewer, engagement, "G3", host, g3_spec()))
    decision = run.gate.decisions.first()
    assert decision.verdict == "pass", (decision.result["reasons"], run.log[-3000:])
    # Nothing was launched for KVBM: the engine serves its metrics.
    assert "kvbm launched" not in run.log
    offload = Measurement.objects.filter(run=run, arm="offload")
    assert offload.exists()
    for measurement in offload:
        facts = measurement.server["side_services"]["kvbm"]
        assert measurement.server["hit_proof"] == "kvbm"
        assert measurement.server["offload_enabled"] is True
        assert measurement.server["engine_offload_enabled"] is False
        assert 0 < facts["lookup_hit_rate"] <= 1
        assert facts["matched_tokens"] > 0 and facts["onboard_blocks_h2d"] > 0
    hit_checks = [c for c in decision.result["validity"] if c["check"] == "external_hit_rate"]
    assert hit_checks and all("kvbm lookup hit rate" in c["reason"] for c in hit_checks)
    kept = set(Artifact.objects.filter(run=run, tool="kvbm-metrics").values_list("name", flat=True))
    assert "offload-c16-r1/kvbm-metrics-after.txt" in kept
    assert host_processes_gone(run)
