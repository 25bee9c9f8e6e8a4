"""The accepted inventory is part of the contract: G1 runs for real on simhost, then the host
changes (another vLLM build, GPUs missing, someone else's job on a GPU) and the G3 run says so
before any server starts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gates.models import Decision, Host, RunStep
from runners.contract import (
    check_host,
    host_unfit,
    inventory_differences,
    inventory_of,
    xid_faults,
)
from runners.errors import ContractError, InfrastructureError
from runners.hostcheck import xid_check
from runners.stepcontext import StepContext
from runners.transport.types import CommandResult
from tests.runners.program.test_gate_programs import drive, pass_gate, start, tasks_run_here  # noqa: F401
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

    def test_gpu_memory_held_beyond_the_tolerance_names_the_gpu_and_the_mib(self):
        health = {
            "gpus": [
                {"index": 0, "memory_used_mib": 50.0},
                {"index": 5, "memory_used_mib": 30529.0},
            ]
        }
        (problem,) = host_unfit(health, held_max_mib=1024)
        assert problem.startswith("GPU 5: 30529 MiB of GPU memory held before any server started")
        with pytest.raises(InfrastructureError, match="GPU 5: 30529 MiB"):
            check_host(inventory_of(FACTS), FACTS, health, step="s", held_max_mib=1024)
        assert host_unfit(health, held_max_mib=40000) == []
        assert host_unfit(health) == []  # no tolerance given: the check is not asked for

    def test_a_critical_xid_in_the_run_window_names_the_gpu_and_the_code(self):
        health = {"gpus": [{"index": 2, "pci_bus_id": "00000000:3B:00.0"}]}
        events = [
            {
                "pci": "0000:3b:00",
                "code": 79,
                "critical": True,
                "time": 1000.0,
                "text": "off the bus",
            },
            {"pci": "0000:3b:00", "code": 48, "critical": True, "time": 10.0, "text": "before"},
            {"pci": "0000:3b:00", "code": 13, "critical": False, "time": 1000.0, "text": "app"},
            {"pci": "0000:cb:00", "code": 94, "critical": True, "time": None, "text": "no time"},
        ]
        assert xid_faults(events, health, since=500.0) == [
            "GPU 2: XID 79 (GPU has fallen off the bus) in the kernel log: off the bus",
            "GPU at PCI 0000:cb:00: XID 94 (contained ECC error) in the kernel log: no time",
        ]
        facts = dict(FACTS, xid_events=events[:1])
        with pytest.raises(InfrastructureError, match="GPU 2: XID 79"):
            check_host(inventory_of(FACTS), facts, health, step="s", since=500.0)
        assert "fit to measure" in check_host(
            inventory_of(FACTS), facts, health, step="s", since=2000.0
        )

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


def kept_output(run, probe: str) -> bytes:
    return bytes(run.artifacts.get(name=f"probes/{probe}.txt").content)


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
    # What the check read the change from stays with the run (and so with its evidence).
    assert b"0.21.0" in kept_output(run, "vllm_version")


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
    assert b"train.py" in kept_output(run, "gpu_nvidia")  # the unfit host's own words, kept


@pytest.mark.slow
@pytest.mark.django_db
def test_gpu_memory_someone_else_holds_is_an_infra_error_naming_gpu_and_mib(
    actor, vendor_viewer, engagement, customer_org, tmp_path
):
    host = local_simhost(customer_org, tmp_path / "host")
    run_g3 = g3_after_g1(actor, vendor_viewer, engagement, host)
    change_host(host, gpu_health={"held_memory": [{"gpu": 1, "used_memory_mib": 30000}]})
    run = run_g3()
    assert run.outcome == "infra_error"
    assert "GPU 1: 30000 MiB of GPU memory held before any server started" in run.reason
    assert not run.decisions.exists() and servers_started(run) == 0


@pytest.mark.slow
@pytest.mark.django_db
def test_an_xid_in_the_run_window_is_an_infra_error_and_an_old_one_is_not(
    actor, vendor_viewer, engagement, customer_org, tmp_path
):
    host = local_simhost(customer_org, tmp_path / "host")
    run_g3 = g3_after_g1(actor, vendor_viewer, engagement, host)
    old = {"gpu": 0, "code": 48, "seconds_ago": 86400}
    change_host(host, gpu_health={"xid_events": [old, {"gpu": 6, "code": 79}]})
    run = run_g3()
    assert run.outcome == "infra_error"
    assert "GPU 6: XID 79 (GPU has fallen off the bus)" in run.reason
    assert "XID 48" not in run.reason  # logged a day before the run began
    assert servers_started(run) == 0


class OneCommand:
    """A transport whose every command prints `stdout`: the kernel log after a session."""

    host = "fake"

    def __init__(self, stdout: str):
        self.stdout = stdout

    def run(self, argv, timeout):
        return CommandResult(0, self.stdout, "", 0.01)


def test_an_xid_logged_during_a_session_ends_the_run_at_its_stop_step(tmp_path):
    line = "2026-12-01T10:15:30,000000+00:00 NVRM: Xid (PCI:0000:18:00): 95, pid=1, Uncontained\n"
    ctx = StepContext(
        transport=OneCommand(line),
        commands={"probes": {"kernel_log": ["dmesg", "--time-format", "iso"]}},
        values={},
        run_dir="/tmp/run",
        token="t",
        scratch=tmp_path,
        window_start=datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp(),
    )
    with pytest.raises(InfrastructureError, match=r"XID 95 \(uncontained ECC error\)"):
        xid_check({"name": "stop offload"}, ctx)
    later = StepContext(**{**vars(ctx), "window_start": ctx.window_start + 3600})
    xid_check({"name": "stop offload"}, later)  # logged before this run: not its problem
