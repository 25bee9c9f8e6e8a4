"""The accepted inventory is part of the contract: G1 runs for real on simhost, then the host
changes (another vLLM build, GPUs missing, someone else's job on a GPU) and the G3 run says so
before any server starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.models import Decision, Host, RunStep
from runners.contract import check_host, host_unfit, inventory_differences, inventory_of
from runners.errors import ContractError, InfrastructureError
from tests.runners.test_gate_programs import drive, pass_gate, start, tasks_run_here  # noqa: F401
from tests.simhosts import g1_spec, g3_spec, local_simhost, ssh_simhost

FACTS = {
    "gpu_inventory": {
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8,
    },
    "vllm_version": "0.20.1",
    "offload_tier": {"present": True, "capacity_gib": 512.0},
    "host_memory_bytes": 2048 * 2**30,
}


class TestPureRules:
    def test_an_unchanged_host_has_no_difference(self):
        assert inventory_differences(inventory_of(FACTS), inventory_of(dict(FACTS))) == []

    def test_each_changed_field_is_named_with_both_values(self):
        later = dict(FACTS, vllm_version="0.21.0")
        later["gpu_inventory"] = dict(FACTS["gpu_inventory"], gpus=[{"name": "H100"}] * 4)
        differences = inventory_differences(inventory_of(FACTS), inventory_of(later))
        assert sorted((d["field"], d["accepted"], d["observed"]) for d in differences) == [
            ("gpu_count", 8, 4),
            ("gpu_models", ["NVIDIA H100 80GB HBM3"], ["H100"]),
            ("vllm_version", "0.20.1", "0.21.0"),
        ]

    def test_host_memory_within_one_percent_is_the_same_host(self):
        later = dict(FACTS, host_memory_bytes=int(FACTS["host_memory_bytes"] * 0.995))
        assert inventory_differences(inventory_of(FACTS), inventory_of(later)) == []

    def test_an_inventory_change_wins_over_an_unfit_host(self):
        health = {"gpus": [{"index": 0, "compute_processes": [{"pid": "1", "name": "x"}]}]}
        with pytest.raises(ContractError):
            check_host(inventory_of(FACTS), dict(FACTS, vllm_version="0.21.0"), health, step="s")
        with pytest.raises(InfrastructureError, match="foreign process 'x'"):
            check_host(inventory_of(FACTS), FACTS, health, step="s")

    def test_a_fact_the_probes_could_not_read_now_is_an_infra_error_not_invalid(self):
        unread = {k: v for k, v in FACTS.items() if k != "vllm_version"}
        with pytest.raises(InfrastructureError, match="could not re-read vllm_version"):
            check_host(inventory_of(FACTS), unread, None, step="s")

    def test_slowdowns_and_ecc_errors_make_a_host_unfit(self):
        health = {
            "gpus": [{"index": 3, "slowdown_reasons": ["hw_slowdown"], "ecc_uncorrectable": 2}]
        }
        assert host_unfit(health) == [
            "GPU 3: clocks held down (hw_slowdown)",
            "GPU 3: 2 uncorrectable ECC error(s)",
        ]


def change_host(host: Host, **changes) -> None:
    """What an admin does to the box between gates: edit the emulated host's config."""
    path = Path(host.parameters["sim_host_config"])
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "gpu_count":
            config["gpu"]["count"] = value
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def g3_after_g1(actor, viewer, engagement, host):
    g1 = drive(start(actor, viewer, engagement, "G1", host, g1_spec()))
    assert g1.decisions.get().verdict == "pass", g1.log
    pass_gate(actor, viewer, engagement, "G2", host)
    return lambda: drive(start(actor, viewer, engagement, "G3", host, g3_spec()))


def servers_started(run) -> int:
    return RunStep.objects.filter(run=run, name__contains="start", state="done").count()


@pytest.mark.slow
@pytest.mark.django_db
def test_another_vllm_build_makes_the_g3_run_invalid_naming_it(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    host = ssh_simhost(customer_org, own_sshd, tmp_path / "host")
    run_g3 = g3_after_g1(actor, vendor_viewer, engagement, host)
    change_host(host, vllm_version="0.21.0")
    run = run_g3()
    decision: Decision = run.decisions.get()
    assert (run.outcome, decision.verdict) == ("completed", "invalid")
    assert [c["check"] for c in decision.clauses] == ["inventory.vllm_version"]
    assert "'0.20.1' accepted at G1, '0.21.0' now" in decision.clauses[0]["cause"]
    assert servers_started(run) == 0
    assert not engagement.gates.get(kind="G3").stop_loss_review


@pytest.mark.slow
@pytest.mark.django_db
def test_gpus_missing_make_the_g3_run_invalid(
    actor, vendor_viewer, engagement, customer_org, tmp_path
):
    host = local_simhost(customer_org, tmp_path / "host")
    run_g3 = g3_after_g1(actor, vendor_viewer, engagement, host)
    change_host(host, gpu_count=4)
    run = run_g3()
    checks = {c["check"]: c for c in run.decisions.get().clauses}
    assert checks["inventory.gpu_count"]["expected"] == 8
    assert checks["inventory.gpu_count"]["observed"] == 4
    assert servers_started(run) == 0


@pytest.mark.slow
@pytest.mark.django_db
def test_a_foreign_process_on_a_gpu_is_an_infra_error_not_a_verdict(
    actor, vendor_viewer, engagement, customer_org, tmp_path
):
    host = local_simhost(customer_org, tmp_path / "host")
    run_g3 = g3_after_g1(actor, vendor_viewer, engagement, host)
    foreign = {"gpu": 2, "pid": 4242, "name": "python3 train.py", "used_memory_mib": 30000}
    change_host(host, gpu_health={"foreign_processes": [foreign]})
    run = run_g3()
    assert run.outcome == "infra_error"
    assert "GPU 2: foreign process 'python3 train.py' (pid 4242)" in run.reason
    assert not run.decisions.exists() and servers_started(run) == 0
