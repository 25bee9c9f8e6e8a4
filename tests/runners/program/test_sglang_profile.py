"""The SGLang profile's code path end to end: real sshd on loopback, simhost in its SGLang
personality behind it (`simhost launch_server`, `simhost bench_serving`, `sglang:` metrics),
the real task code. What differs from the vLLM path is data: the profile's engine section."""

from __future__ import annotations

import pytest

from gates.models import Artifact, Host, Measurement, Profile
from tests.runners.program.test_gate_programs import drive, host_processes_gone, start
from tests.simhosts import g1_spec, g2_spec, g3_spec, ssh_simhost

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def tasks_run_here(monkeypatch, settings):
    from gates.services import pokes
    from worker import tasks

    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    settings.TOLLGATE_TASK_BUDGET_S = 3


@pytest.fixture
def sglang_host(customer_org, own_sshd, tmp_path) -> Host:
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host")
    host.profile = Profile.objects.get(name="simhost-sglang")
    host.save(update_fields=["profile"])
    return host


def test_an_sglang_hicache_host_passes_g1_g2_and_g3(actor, vendor_viewer, engagement, sglang_host):
    # The template asks for a vLLM version; an SGLang host is held to its own engine's.
    spec = g1_spec()
    spec["expect"].update(vllm_min=None, engine_min="0.1")
    g1 = drive(start(actor, vendor_viewer, engagement, "G1", sglang_host, spec))
    decision = g1.gate.decisions.first()
    assert (g1.outcome, decision.verdict) == ("completed", "pass"), decision.clauses
    assert any(row["check"] == "engine_min" and row["ok"] for row in decision.clauses)
    g2 = drive(start(actor, vendor_viewer, engagement, "G2", sglang_host, g2_spec()))
    decision = g2.gate.decisions.first()
    assert decision.verdict == "pass", decision.clauses
    hit = next(row for row in decision.clauses if row["check"] == "offload_hit")
    assert hit["verdict"] == "pass", hit
    # The TTFT clauses: output throughput's interval, from four repetitions of three separate
    # bench_serving runs a cell, straddled the vLLM path's 29 % bar on a loaded 2-core box.
    clauses = [c for c in g3_spec()["clauses"] if c["metric"] == "ttft_p50"]
    g3 = drive(start(actor, vendor_viewer, engagement, "G3", sglang_host, g3_spec(clauses=clauses)))
    decision = g3.gate.decisions.first()
    assert decision.verdict == "pass", decision.result["reasons"]
    measurements = Measurement.objects.filter(run=g3)
    offload = measurements.filter(arm="offload").first()
    assert offload is not None
    # The server facts came from sglang: series; HiCache served the resumed sessions.
    assert offload.server["engine_metrics"] == "sglang-metrics"
    assert offload.server["offload_enabled"] is True
    assert offload.server["external_hit_rate"] > 0.2  # the demo world's G2 floor; 0.49 measured
    assert offload.server["offload_load_tokens"] > 0
    recompute = measurements.filter(arm="recompute").first()
    assert recompute is not None and recompute.server["offload_enabled"] is False
    tools = set(Artifact.objects.filter(run=g3).values_list("tool", flat=True))
    assert {"sglang-bench", "sglang-metrics"} <= tools
    assert host_processes_gone(g3)
