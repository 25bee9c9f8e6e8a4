"""A soak on an AMD host watched as closely as one on NVIDIA: the agent runs amd-smi's metric and
process views each window on a host whose GPU probe was AMD's (never on NVIDIA's), and the
collector (runners/soak/fitness.py) reads them with the contract's amd-smi reader, on output
rendered by simhost for an MI300X host: an ECC rise or a foreign process ends the soak, the
server's own processes do not, throttling is a note, unreadable output a note."""

from __future__ import annotations

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.soak import collector, fitness
from runners.soak import watch as soakwatch
from simhost.host.config import host_config_from_dict
from simhost.host.kernellog import render_kernel_log
from simhost.host.smi import GpuLive, render
from tests.runners.soak.test_soak_health import NOW, fold

SERVER_PID = 4242
WORKER_PID = 4243


def amd_files(**gpu_health) -> dict[str, bytes]:
    """One window's health files from an emulated MI300X host, as the agent keeps them."""
    host = host_config_from_dict({"preset": "mi300x8-rocm", "gpu_health": gpu_health}, "test")
    live = [GpuLive(memory_used_mib=150000.0, utilization_pct=90.0)] * host.gpu_count
    return {
        "smi.txt": render("rocm-json", host, live, NOW).encode(),
        "amd-metric.txt": render("amd-smi-json", host, live, NOW).encode(),
        "amd-process.txt": render("amd-smi-process", host, live, NOW).encode(),
        "kernel-log.txt": render_kernel_log(host, NOW).encode(),
    }


def amd_window(seq: int = 0, *, files: dict | None = None, **line) -> dict:
    line = {"seq": seq, "server_pid": SERVER_PID, "server_pids": [SERVER_PID, WORKER_PID], **line}
    return fitness.window_health(line, amd_files() if files is None else files)


def test_a_healthy_amd_window_reads_every_gpu_by_its_pci_address_and_no_fault():
    health = amd_window()
    assert health["notes"] == [] and health["xid_events"] == []
    assert [gpu["index"] for gpu in health["gpus"]] == list(range(8))
    # amd-smi metric has no address: it comes from smi.txt, rocm-smi's inventory.
    assert health["gpus"][0]["pci_bus_id"] == "0000:18:00.0"
    assert {gpu["ecc_uncorrectable"] for gpu in health["gpus"]} == {0}
    assert fold(health)[1] == [[]]


def test_an_ecc_rise_on_an_amd_gpu_ends_the_soak_naming_window_and_gpu():
    summary, faults = fold(amd_window(), amd_window(1))
    assert faults == [[], []]
    assert summary["ecc_baseline"]["0000:18:00.0"] == {"count": 0, "seq": 0}
    rose = amd_window(2, files=amd_files(ecc_uncorrectable=2))
    _, found = fitness.health_fold(summary, 2, rose)
    assert len(found) == 8
    reason = fitness.fault_reason(2, found)
    assert reason.startswith(
        "the host became unfit to measure in window 2: "
        "GPU 0: uncorrectable ECC errors rose from 0 (window 0) to 2; GPU 1: "
    )


def test_someone_elses_process_on_an_amd_gpu_ends_the_soak():
    job = {"gpu": 2, "pid": 999, "name": "python3 train.py", "used_memory_mib": 30000}
    _, faults = fold(amd_window(files=amd_files(foreign_processes=[job])))
    assert faults == [["GPU 2: foreign process 'python3 train.py' (pid 999) holds 30000.0 MiB"]]


def test_the_servers_own_processes_on_amd_gpus_are_not_foreign():
    own = [
        {"gpu": gpu, "pid": WORKER_PID, "name": "VLLM::Worker", "used_memory_mib": 150000}
        for gpu in range(8)
    ]
    own.append({"gpu": 0, "pid": SERVER_PID, "name": "vllm serve", "used_memory_mib": 500})
    health = amd_window(files=amd_files(foreign_processes=own))
    assert all(gpu["foreign_processes"] == [] for gpu in health["gpus"])
    assert fold(health)[1] == [[]]
    # The same processes under another soak's server are someone else's.
    other = fitness.window_health(
        {"server_pid": 1, "server_pids": [1]}, amd_files(foreign_processes=own)
    )
    assert len(fold(other)[1][0]) == 9


def test_a_thermal_violation_on_an_amd_gpu_is_a_note_and_the_soak_goes_on():
    hot = amd_files(throttle_reasons=["hbm_thermal"])
    summary, faults = fold(amd_window(), amd_window(1, files=hot), amd_window(2, files=hot))
    assert faults == [[], [], []]
    assert amd_window(files=hot)["notes"][0] == "GPU 0: clocks held down (hbm_thermal)"
    first = summary["findings"][0]
    assert (first["note"], first["first_seq"], first["windows"]) == (
        "GPU 0: clocks held down (hbm_thermal)",
        1,
        2,
    )


def test_an_amdgpu_fault_in_the_kernel_log_names_the_gpu_through_the_inventory():
    ras = amd_files(amdgpu_events=[{"gpu": 3, "kind": "ras_uncorrectable", "seconds_ago": 5}])
    (fault,) = fold(amd_window(files=ras))[1][0]
    assert fault.startswith("GPU 3: amdgpu uncorrectable ECC error (ras_uncorrectable)")


@pytest.mark.parametrize(
    ("errors", "change", "expected"),
    [
        (
            {"amd_metric": "amd-smi exited 1: amdgpu not initialized"},
            {"amd-metric.txt": None},
            "amd-smi metric could not be read (amd-smi exited 1: amdgpu not initialized): "
            "GPU health not checked in this window",
        ),
        ({}, {"amd-metric.txt": b"Error: no GPU"}, "amd-smi metric output: not valid JSON"),
        ({}, {"amd-metric.txt": b'[{"usage": {}}]'}, "amd-smi metric output: "),
        ({}, {"amd-metric.txt": b""}, "amd-smi metric gave nothing: GPU health not checked"),
    ],
)
def test_amd_smi_metric_that_cannot_be_read_is_a_note_never_a_fault(errors, change, expected):
    files = {name: data for name, data in {**amd_files(), **change}.items() if data is not None}
    health = amd_window(files=files, probe_errors=errors)
    assert health["gpus"] is None
    assert any(note.startswith(expected) for note in health["notes"]), health["notes"]
    assert fold(health)[1] == [[]]


@pytest.mark.parametrize(
    ("errors", "process", "expected"),
    [
        ({"amd_process": "amd-smi exited 2: busy"}, None, "amd-smi process could not be read"),
        ({}, None, "amd-smi process gave nothing"),
        ({}, b'{"gpu_data": 3}', "amd-smi process output: "),
    ],
)
def test_without_readable_processes_the_rest_of_amd_smi_still_counts(errors, process, expected):
    files = {**amd_files(ecc_uncorrectable=1)}
    del files["amd-process.txt"]
    if process is not None:
        files["amd-process.txt"] = process
    health = amd_window(files=files, probe_errors=errors)
    (note,) = health["notes"]
    assert note.startswith(expected) and note.endswith(
        "foreign processes not checked in this window"
    )
    assert [gpu["ecc_uncorrectable"] for gpu in health["gpus"]] == [1] * 8


def test_without_the_inventory_amd_gpus_are_still_read_by_index():
    files = {name: data for name, data in amd_files().items() if name != "smi.txt"}
    health = amd_window(files=files, probe_errors={"smi": "amd-smi exited 1: timeout"})
    assert [gpu["pci_bus_id"] for gpu in health["gpus"]] == [None] * 8
    assert health["notes"] == [
        "smi could not be read (amd-smi exited 1: timeout): GPUs not matched to PCI addresses "
        "in this window"
    ]


def test_the_amd_files_are_kept_under_their_tools_names():
    line = {"seq": 4, "start": 1.0, "end": 2.0, "server_pid": SERVER_PID}
    window = collector.Window(line, files=amd_files(ecc_uncorrectable=3))
    kept = {artifact.name: artifact.tool for artifact in collector.window_artifacts(window)}
    assert kept["soak/w000004/amd-metric.txt"] == "amd-smi-metric"
    assert kept["soak/w000004/amd-process.txt"] == "amd-smi-process"
    assert kept["soak/w000004/smi.txt"] == "gpu-inventory"
    sample = collector.window_sample(window)
    assert [gpu["ecc_uncorrectable"] for gpu in sample["health"]["gpus"]] == [3] * 8
    assert sample["gpu_memory_used_mib"] == 8 * 150000.0


# --- the agent's side (standard library, run on the host) ---


@pytest.fixture
def fresh_agent():
    """The agent's memory of which GPU probe worked starts empty, as in a new agent process."""
    soakwatch._WORKED.clear()
    yield
    soakwatch._WORKED.clear()


def agent_config(tmp_path, smi_argvs, vendors, *, metric=None, process=None) -> dict:
    """A config whose amd-smi probes print `metric` / `process`, or mark that they ran."""
    ran = tmp_path / "amd-smi-ran"

    def probe(name: str, file: str, output: str | None) -> dict:
        script = f"touch {ran}; " + (f"printf %s '{output}'" if output is not None else "exit 3")
        return {"name": name, "file": file, "argv": ["sh", "-c", script]}

    return {
        "smi_argvs": smi_argvs,
        "smi_vendors": vendors,
        "amd_probes": [
            probe("amd_metric", "amd-metric.txt", metric),
            probe("amd_process", "amd-process.txt", process),
        ],
        "ran": ran,
    }


def test_an_nvidia_host_never_runs_the_amd_smi_probes(tmp_path, fresh_agent):
    nvidia = ["echo", "<nvidia_smi_log/>"]
    config = agent_config(tmp_path, [nvidia, ["echo", "{}"]], ["nvidia", "amd", "amd"])
    files, errors = {}, {}
    for _ in range(3):
        soakwatch.watch(config, str(tmp_path), files, errors)
    assert set(files) == {"smi.txt"} and errors == {}
    assert not config["ran"].exists()
    # Nor does a host where no GPU probe works (which GPUs it has, nobody knows).
    config = agent_config(tmp_path, [["false"], ["false"]], ["nvidia", "amd"])
    soakwatch._WORKED.clear()
    soakwatch.watch(config, str(tmp_path), files, errors)
    assert set(errors) == {"smi"} and not config["ran"].exists()


def test_an_amd_host_runs_them_every_window_and_says_which_failed(tmp_path, fresh_agent):
    smi = [["sh", "-c", "echo 'nvidia-smi: not found' >&2; exit 127"], ["echo", "{}"]]
    config = agent_config(tmp_path, smi, ["nvidia", "amd"], metric="[1]", process=None)
    files, errors = {}, {}
    soakwatch.watch(config, str(tmp_path), files, errors)
    assert files["amd-metric.txt"] == b"[1]" and "amd-process.txt" not in files
    assert errors == {"amd_process": "sh exited 3: "}
    # The next window (the AMD probe now tried first): both read, the failure forgotten.
    config["amd_probes"][1]["argv"] = ["printf", "[2]"]
    soakwatch.watch(config, str(tmp_path), files, errors)
    assert (files["amd-metric.txt"], files["amd-process.txt"], errors) == (b"[1]", b"[2]", {})
    assert soakwatch._WORKED == {"smi": 1}


def test_amd_smi_output_over_the_bound_is_not_kept_and_why_is_said(
    tmp_path, fresh_agent, monkeypatch
):
    monkeypatch.setattr(soakwatch, "AMD_OUTPUT_MAX_BYTES", 8)
    config = agent_config(tmp_path, [["echo", "{}"]], ["amd"], metric="[1,2,3,4,5]", process="[]")
    files, errors = {"amd-metric.txt": b"an earlier read"}, {}
    soakwatch.watch(config, str(tmp_path), files, errors)
    assert errors == {"amd_metric": "sh printed more than 8 bytes: not kept"}
    assert "amd-metric.txt" not in files and files["amd-process.txt"] == b"[]"


@pytest.mark.parametrize("profile", ["vllm", "simhost"])
def test_the_agent_config_names_each_gpu_probes_vendor_and_the_amd_smi_probes(profile):
    document = next(doc for doc in builtin_profile_documents() if doc["name"] == profile)
    commands = {"serve": {"offload": ["serve"]}, "bench": {"random": ["bench"]}}
    commands["probes"] = document["commands"]["probes"]
    values = {"host_address": "127.0.0.1", "port": 8000, "python": "/usr/bin/python3"}
    values.update(run_dir="/r", sim_host_config="/r/host.json")
    load = {"dataset": "random", "seed": 1, "num_prompts": 8}
    spec = {"load": load, "duration_h": 1, "window_min": 1}
    spec["limits"] = {"max_crashes": 0}
    config = collector.agent_config(spec, commands, values, collector.SoakPaths("/r"))
    expected = {"vllm": ["nvidia", "amd", "amd"], "simhost": ["nvidia", "amd"]}[profile]
    assert config["smi_vendors"] == expected
    assert len(config["smi_argvs"]) == len(expected)
    probes = {probe["name"]: probe for probe in config["amd_probes"]}
    assert [probes[name]["file"] for name in ("amd_metric", "amd_process")] == [
        "amd-metric.txt",
        "amd-process.txt",
    ]
    if profile == "vllm":
        assert probes["amd_metric"]["argv"] == ["amd-smi", "metric", "--gpu", "all", "--json"]


def test_an_amdgpu_fault_a_program_causes_is_a_note_in_amdgpus_words():
    faults = [{"gpu": 1, "kind": "page_fault", "seconds_ago": 5}]
    health = amd_window(files=amd_files(amdgpu_events=faults))
    (note,) = health["notes"]
    assert note.startswith(
        "amdgpu GPU page fault (page_fault) at PCI 0000:28:00.0 in the kernel log (what a "
        "faulting program causes"
    )
    assert fold(health)[1] == [[]]
