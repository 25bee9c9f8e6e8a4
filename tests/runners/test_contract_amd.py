"""ROCm hosts held to the same fitness bar as NVIDIA ones: amd-smi's view of the GPUs and
amdgpu's kernel-log faults end a run infra_error naming the GPU and the cause. The rules
(runners.contract), the contract step reading the probes (runners.hostcheck), and G3 runs over
real sshd against an AMD simhost, as tests/runners/test_contract_check.py does for NVIDIA."""

from __future__ import annotations

from datetime import datetime

import pytest

from gates import services
from gates.specs import validation as specs
from runners.contract import host_unfit, xid_faults
from runners.errors import InfrastructureError
from runners.hostcheck import contract_step
from runners.stepcontext import StepContext
from runners.transport.types import CommandResult
from simhost.host.config import host_config_from_dict
from simhost.host.kernellog import render_kernel_log
from simhost.host.smi import GpuLive, render
from tests.runners.adapters.golden import FIXTURES
from tests.runners.program.test_gate_programs import drive, pass_gate, start, tasks_run_here  # noqa: F401
from tests.runners.test_contract_check import change_host, servers_started
from tests.simhosts import g3_spec, ssh_simhost

RAS_LINE = "2 new uncorrectable hardware errors detected in umc block"


def amd_event(kind: str, pci: str = "0000:48:00.0", critical: bool = True, time=1000.0):
    return {
        "vendor": "amd",
        "pci": pci,
        "code": None,
        "kind": kind,
        "critical": critical,
        "time": time,
        "text": f"socket: 0, die: 0, {RAS_LINE}",
    }


class TestRules:
    def test_an_amdgpu_fault_names_the_gpu_by_its_address_and_the_fault_by_kind(self):
        health = {"source": "amd-smi-json", "gpus": [{"index": 3, "pci_bus_id": "0000:48:00.0"}]}
        assert xid_faults([amd_event("ras_uncorrectable")], health, since=500.0) == [
            "GPU 3: amdgpu uncorrectable ECC error (ras_uncorrectable) in the kernel log: "
            f"socket: 0, die: 0, {RAS_LINE}"
        ]

    def test_program_faults_and_faults_before_the_run_are_not_the_hosts(self):
        events = [
            amd_event("page_fault", critical=False),
            amd_event("gpu_reset", critical=False),
            amd_event("ras_fatal", time=10.0),
        ]
        assert xid_faults(events, None, since=500.0) == []

    def test_an_event_stored_without_a_vendor_is_still_read_as_an_xid(self):
        event = {"pci": "0000:3b:00", "code": 79, "critical": True, "time": None, "text": "bus"}
        (fault,) = xid_faults([event], None, since=0.0)
        assert fault.startswith("GPU at PCI 0000:3b:00: XID 79 (GPU has fallen off the bus)")

    def test_memory_held_on_an_amd_gpu_says_amd_smi_saw_no_process(self):
        health = {"source": "amd-smi-json", "gpus": [{"index": 1, "memory_used_mib": 30000.0}]}
        (problem,) = host_unfit(health, held_max_mib=1024)
        assert problem.endswith("(tolerance 1024 MiB; no process visible to amd-smi)")


class Commands:
    """A transport whose commands print what the emulated host's tools would; a command it
    has no output for is not installed (exit 127), as amd-smi on an NVIDIA host."""

    host = "fake"

    def __init__(self, outputs: dict[str, str]):
        self.outputs = outputs

    def run(self, argv, timeout):
        if argv[0] in self.outputs:
            return CommandResult(0, self.outputs[argv[0]], "", 0.01)
        return CommandResult(127, "", f"{argv[0]}: command not found", 0.01)


PROBES = {
    "gpu_nvidia": ["nvidia-smi", "-q", "-x"],
    "gpu_rocm": ["rocm-smi", "--json"],
    "amd_metric": ["amd-smi-metric"],
    "amd_process": ["amd-smi-process"],
    "kernel_log": ["dmesg"],
}


def step_on(outputs: dict[str, str], tmp_path, since: float = 0.0):
    ctx = StepContext(
        transport=Commands(outputs),
        commands={"probes": PROBES},
        values={},
        run_dir="/tmp/run",
        token="t",
        scratch=tmp_path,
        window_start=since,
    )
    step = {"name": "check host against the accepted inventory", "probes": list(PROBES)}
    return contract_step(step, {}, ctx)


def amd_outputs(gpu_health: dict | None = None) -> dict[str, str]:
    host = host_config_from_dict({"preset": "mi300x8-rocm", "gpu_health": gpu_health or {}}, "t")
    # Someone else's process holds memory, as `simhost smi` adds it from the config.
    held = [
        sum(p.used_memory_mib for p in host.gpu_health.foreign_processes if p.gpu == index)
        for index in range(host.gpu_count)
    ]
    live = [GpuLive(max(1.0, mib), 0.0) for mib in held]
    return {
        "rocm-smi": render("rocm-json", host, live, None),
        "amd-smi-metric": render("amd-smi-json", host, live, None),
        "amd-smi-process": render("amd-smi-process", host, live, None),
        "dmesg": render_kernel_log(host, datetime.now().astimezone()),
    }


class TestTheContractStep:
    def test_an_nvidia_host_reads_nvidia_smi_and_never_mentions_amd_smi(self, tmp_path):
        xml = (FIXTURES / "nvidia-smi" / "telegraf__a100-sxm4-v12.xml").read_text()
        progress = step_on({"nvidia-smi": xml}, tmp_path)
        assert progress.log == (
            "no inventory accepted at G1 to compare with; host fit to measure\n"
            "kernel log not readable: XID errors not checked\n"
        )

    def test_an_amd_host_with_a_ras_line_is_unfit_naming_the_gpu(self, tmp_path):
        outputs = amd_outputs({"amdgpu_events": [{"gpu": 3, "kind": "ras_uncorrectable"}]})
        with pytest.raises(InfrastructureError) as caught:
            step_on(outputs, tmp_path)
        # The GPU is named through the inventory probe's PCI address (rocm-smi's PCI Bus).
        assert "GPU 3: amdgpu uncorrectable ECC error (ras_uncorrectable)" in str(caught.value)
        assert caught.value.permanent

    def test_a_healthy_amd_host_is_fit_and_its_probes_are_kept(self, tmp_path):
        progress = step_on(amd_outputs(), tmp_path)
        assert progress.log.startswith("no inventory accepted at G1 to compare with; host fit")
        names = {artifact.name for artifact in progress.artifacts}
        assert {"probes/amd_metric.txt", "probes/amd_process.txt"} <= names

    def test_unreadable_amd_smi_output_is_said_in_the_log_not_guessed(self, tmp_path):
        outputs = dict(amd_outputs(), **{"amd-smi-metric": "Error: amdgpu not initialized"})
        progress = step_on(outputs, tmp_path)
        assert "amd-smi metric output: not valid JSON" in progress.log
        assert "GPU fitness not checked" in progress.log

    def test_without_amd_smi_process_held_memory_is_still_caught(self, tmp_path):
        foreign = {"gpu": 5, "pid": 1, "name": "job", "used_memory_mib": 20000}
        outputs = amd_outputs({"foreign_processes": [foreign]})
        del outputs["amd-smi-process"]
        with pytest.raises(InfrastructureError, match="GPU 5: 20000 MiB of GPU memory held"):
            step_on(outputs, tmp_path)


def amd_g1_spec() -> dict:
    document = specs.default_spec("G1")
    document["expect"].update(
        gpu_model_pattern="MI300X", gpu_count=8, rocm_min="6.3", free_disk_min_gib=0.01
    )
    return document


@pytest.fixture
def amd_host(customer_org, own_sshd, tmp_path):
    return ssh_simhost(customer_org, own_sshd, tmp_path / "host", preset="mi300x8-rocm")


def g3_after_amd_g1(actor, viewer, engagement, host):
    g1 = drive(start(actor, viewer, engagement, "G1", host, amd_g1_spec()))
    assert g1.decisions.get().verdict == "pass", g1.log
    pass_gate(actor, viewer, engagement, "G2", host)
    return lambda **options: drive(
        start(actor, viewer, engagement, "G3", host, g3_spec()), **options
    )


def unfit_amd_g3(actor, viewer, engagement, host, gpu_health: dict):
    run_g3 = g3_after_amd_g1(actor, viewer, engagement, host)
    change_host(host, gpu_health=gpu_health)
    run = run_g3()
    assert run.outcome == "infra_error", run.log
    assert "the host is not fit to measure" in run.reason
    assert not run.decisions.exists() and servers_started(run) == 0
    return run


@pytest.mark.slow
@pytest.mark.django_db
class TestAmdHostsOverSsh:
    def test_a_foreign_process_on_an_amd_gpu_is_an_infra_error(
        self, actor, vendor_viewer, engagement, amd_host
    ):
        foreign = {"gpu": 2, "pid": 4242, "name": "python3 train.py", "used_memory_mib": 30000}
        run = unfit_amd_g3(
            actor, vendor_viewer, engagement, amd_host, {"foreign_processes": [foreign]}
        )
        assert "GPU 2: foreign process 'python3 train.py' (pid 4242) holds 30000.0 MiB" in (
            run.reason
        )

    def test_uncorrectable_ecc_on_an_amd_gpu_is_an_infra_error(
        self, actor, vendor_viewer, engagement, amd_host
    ):
        run = unfit_amd_g3(actor, vendor_viewer, engagement, amd_host, {"ecc_uncorrectable": 2})
        assert "GPU 0: 2 uncorrectable ECC error(s)" in run.reason

    def test_an_active_thermal_violation_is_an_infra_error(
        self, actor, vendor_viewer, engagement, amd_host
    ):
        health = {"throttle_reasons": ["hbm_thermal"]}
        run = unfit_amd_g3(actor, vendor_viewer, engagement, amd_host, health)
        assert "GPU 7: clocks held down (hbm_thermal)" in run.reason

    def test_an_amdgpu_ras_line_in_the_run_window_is_an_infra_error_and_an_old_one_is_not(
        self, actor, vendor_viewer, engagement, amd_host
    ):
        old = {"gpu": 0, "kind": "ras_fatal", "seconds_ago": 86400}
        health = {"amdgpu_events": [old, {"gpu": 6, "kind": "ras_uncorrectable"}]}
        run = unfit_amd_g3(actor, vendor_viewer, engagement, amd_host, health)
        assert "GPU 6: amdgpu uncorrectable ECC error (ras_uncorrectable) in the kernel log" in (
            run.reason
        )
        assert "ras_fatal" not in run.reason  # logged a day before the run began

    def test_a_healthy_amd_host_passes_the_check_despite_a_program_fault(
        self, actor, vendor_viewer, engagement, amd_host
    ):
        run_g3 = g3_after_amd_g1(actor, vendor_viewer, engagement, amd_host)
        # A page fault and the reset after it are what a faulting program causes.
        faults = [{"gpu": 1, "kind": "page_fault"}, {"gpu": 1, "kind": "gpu_reset"}]
        change_host(amd_host, gpu_health={"amdgpu_events": faults})
        run = run_g3(until=lambda r: servers_started(r) > 0)
        check = run.steps.get(name="check host against the accepted inventory")
        assert check.state == "done"
        assert "host matches the" in run.log and "fit to measure" in run.log
        assert "not checked" not in run.log
        services.run_cancel(
            actor=actor, viewer=vendor_viewer, run=run, reason="the test stops this run"
        )
        assert drive(run).state == "canceled"
