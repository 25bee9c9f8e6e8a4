"""The pure rules that watch a soak's host (runners/soak/fitness.py) on smi and kernel-log output
rendered by simhost, and the agent's side of it (runners/soak/watch.py): which kernel-log
lines are new, how a window's log is bounded, the server's process tree, the GPU probe order."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.soak import collector, fitness
from runners.soak import watch as soakwatch
from simhost.host.config import host_config_from_dict
from simhost.host.inventory import GpuLive
from simhost.host.kernellog import render_kernel_log
from simhost.host.nvidiasmi import render_nvidia_xml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RUN_STARTED = NOW.timestamp() - 600
SERVER_PID = 4242


def host(**gpu_health):
    return host_config_from_dict({"gpu_health": gpu_health}, "test")


def smi(**gpu_health) -> bytes:
    live = [GpuLive(memory_used_mib=70000.0, utilization_pct=90.0)] * 8
    return render_nvidia_xml(host(**gpu_health), live, NOW).encode()


def kernel_log(*events: dict) -> bytes:
    return render_kernel_log(host(xid_events=list(events)), NOW).encode()


def window(seq: int = 0, *, files: dict | None = None, **line) -> dict:
    line = {"seq": seq, "server_pid": SERVER_PID, "server_pids": [SERVER_PID, 4243], **line}
    default = {"smi.txt": smi(), "kernel-log.txt": kernel_log()}
    return fitness.window_health(line, default if files is None else files)


def fold(*healths: dict) -> tuple[dict, list[list[str]]]:
    summary, faults = {"since": RUN_STARTED}, []
    for seq, health in enumerate(healths):
        summary, found = fitness.health_fold(summary, seq, health)
        faults.append(found)
    return summary, faults


def test_a_healthy_window_reads_every_gpu_and_no_fault():
    health = window()
    assert [gpu["index"] for gpu in health["gpus"]] == list(range(8))
    assert health["xid_events"] == [] and health["notes"] == []
    assert fold(health)[1] == [[]]


def test_the_servers_own_processes_are_expected_and_anyone_elses_end_the_soak():
    processes = [
        {"gpu": 0, "pid": 4243, "name": "VLLM::Worker_TP0", "used_memory_mib": 70000},
        {"gpu": 1, "pid": 999, "name": "python train.py", "used_memory_mib": 30000},
    ]
    health = window(files={"smi.txt": smi(foreign_processes=processes)})
    assert health["gpus"][0]["foreign_processes"] == []  # a worker of the server
    _, faults = fold(health)
    assert faults == [["GPU 1: foreign process 'python train.py' (pid 999) holds 30000.0 MiB"]]


def test_on_real_nvidia_smi_output_only_processes_outside_the_servers_tree_are_foreign():
    capture = FIXTURES / "nvidia-smi" / "telegraf__rtx-4000-sff-ada-v13.xml"
    health = fitness.window_health({"server_pid": 4937}, {"smi.txt": capture.read_bytes()})
    foreign = health["gpus"][0]["foreign_processes"]
    assert [process["pid"] for process in foreign] == ["34626"]  # chromium; python is ours
    assert health["notes"] == []


def test_a_critical_xid_since_the_run_started_names_the_gpu_and_code():
    events = [{"gpu": 2, "code": 79, "seconds_ago": 5}]
    health = window(files={"kernel-log.txt": kernel_log(*events), "smi.txt": smi()})
    _, faults = fold(health)
    assert len(faults[0]) == 1
    assert faults[0][0].startswith("GPU 2: XID 79 (GPU has fallen off the bus) in the kernel log")
    reason = fitness.fault_reason(7, faults[0])
    assert reason.startswith("the host became unfit to measure in window 7: GPU 2: XID 79")


def test_an_xid_logged_before_the_run_started_was_the_contract_steps_to_refuse():
    old = {"gpu": 0, "code": 48, "seconds_ago": 3600}
    assert fold(window(files={"kernel-log.txt": kernel_log(old)}))[1] == [[]]


def test_without_smi_an_xid_names_the_gpu_by_its_pci_address():
    health = window(files={"kernel-log.txt": kernel_log({"gpu": 1, "code": 48})})
    assert health["gpus"] is None
    assert fold(health)[1][0][0].startswith("GPU at PCI 0000:28:00: XID 48 (double-bit ECC")


def test_a_programs_own_xid_is_a_note_not_a_host_fault():
    health = window(files={"kernel-log.txt": kernel_log({"gpu": 0, "code": 31})})
    assert health["xid_events"] == []
    assert health["notes"] and health["notes"][0].startswith("XID 31 at PCI 0000:18:00")
    assert fold(health)[1] == [[]]


def test_uncorrectable_ecc_errors_that_rose_since_the_first_window_end_the_soak():
    summary, faults = fold(window(), window(1), window(2))
    assert faults == [[], [], []]
    rose = window(3, files={"smi.txt": smi(ecc_uncorrectable=2)})
    _, found = fitness.health_fold(summary, 3, rose)
    assert len(found) == 8
    assert found[0] == "GPU 0: uncorrectable ECC errors rose from 0 (window 0) to 2"


def test_a_count_already_there_in_the_first_window_is_the_baseline_and_a_reset_no_finding():
    first, same, reset = (
        window(seq, files={"smi.txt": smi(ecc_uncorrectable=count)})
        for seq, count in ((0, 3), (1, 3), (2, 0))
    )
    summary, faults = fold(first, same, reset)
    assert faults == [[], [], []]
    assert summary["ecc_baseline"]["00000000:18:00.0"] == {"count": 3, "seq": 0}


def test_throttled_clocks_are_notes_counted_over_the_windows_they_lasted():
    hot = {"smi.txt": smi(throttle_reasons=["hw_slowdown", "gpu_idle"])}
    summary, faults = fold(window(), window(1, files=hot), window(2, files=hot), window(3))
    assert faults == [[], [], [], []]
    assert window(1, files=hot)["notes"][0] == "GPU 0: clocks held down (hw_slowdown)"
    first = summary["findings"][0]
    assert first == {
        "note": "GPU 0: clocks held down (hw_slowdown)",
        "first_seq": 1,
        "last_seq": 2,
        "windows": 2,
    }
    assert len(summary["findings"]) == 8 and summary["windows"] == 4


@pytest.mark.parametrize(
    ("line", "files", "expected"),
    [
        ({"probe_errors": {"smi": "nvidia-smi exited 15: GPU lost"}}, {}, "smi could not be read"),
        ({}, {"smi.txt": b""}, "smi printed nothing"),
        ({}, {"smi.txt": b"<nvidia_smi_log><gpu>"}, "smi output unreadable"),
        ({"probe_errors": {"kernel_log": "journalctl: timed out"}}, {}, "kernel log could not"),
    ],
)
def test_a_probe_that_cannot_be_read_is_a_note_never_a_fault(line, files, expected):
    health = fitness.window_health({"seq": 0, **line}, files)
    assert any(note.startswith(expected) for note in health["notes"]), health["notes"]
    assert fold(health)[1] == [[]]


def test_a_window_stored_before_the_soak_watched_health_changes_nothing():
    summary, faults = fitness.health_fold({"since": RUN_STARTED}, 0, None)
    assert faults == [] and summary["windows"] == 0


def test_the_window_sample_carries_health_and_its_notes_and_the_kernel_log_is_kept():
    line = {"seq": 4, "start": 1.0, "end": 2.0, "server_pid": SERVER_PID, "files": []}
    hot = {"smi.txt": smi(throttle_reasons=["sw_thermal_slowdown"]), "kernel-log.txt": b""}
    sample = collector.window_sample(collector.Window(line, files=hot))
    assert sample["health"]["notes"][0] in sample["notes"]
    assert "health" not in collector.window_sample(
        collector.Window(line, files=hot), watch_health=False
    )
    kept = {a.name: a.tool for a in collector.window_artifacts(collector.Window(line, files=hot))}
    assert kept["soak/w000004/kernel-log.txt"] == "kernel-log"


# --- the agent's side (standard library, run on the host) ---


def test_only_the_lines_since_the_previous_capture_are_new():
    first, cursor = soakwatch.lines_since(["a", "b", "c", "d"], None)
    assert first == ["a", "b", "c", "d"]
    news, cursor = soakwatch.lines_since(["a", "b", "c", "d", "e", "f"], cursor)
    assert news == ["e", "f"]
    # The ring buffer dropped its oldest lines meanwhile: the anchor is found further up.
    news, cursor = soakwatch.lines_since(["d", "e", "f", "g"], cursor)
    assert news == ["g"]
    # Cleared or rebooted: the anchor is gone, every line is new.
    assert soakwatch.lines_since(["boot", "x"], cursor)[0] == ["boot", "x"]
    assert soakwatch.lines_since([], cursor)[0] == []


def test_repeated_identical_lines_after_the_anchor_are_still_new():
    _, cursor = soakwatch.lines_since(["t1 x", "t1 x", "t1 x"], None)
    news, _ = soakwatch.lines_since(["t1 x", "t1 x", "t1 x", "t1 x", "t1 x"], cursor)
    assert news == ["t1 x", "t1 x"]


def test_a_window_keeps_the_start_and_the_end_of_a_flood_of_kernel_lines():
    lines = [f"line {i:05d} " + "x" * 80 for i in range(5000)]
    text = soakwatch.bounded(lines, limit=8192)
    assert len(text) < 8192 + 100
    assert text.startswith("line 00000 ") and text.endswith(lines[-1] + "\n")
    assert "bytes of kernel log left out]" in text
    assert soakwatch.bounded(["one", "two"]) == "one\ntwo\n"


def test_the_cursor_lives_in_the_data_dir_so_a_relaunched_agent_goes_on(tmp_path):
    assert soakwatch.kernel_log_news(b"a\nb\n", str(tmp_path)) == b"a\nb\n"
    assert soakwatch.kernel_log_news(b"a\nb\nc\n", str(tmp_path)) == b"c\n"
    assert json.loads((tmp_path / soakwatch.CURSOR_FILE).read_text())["count"] == 3


def test_a_crashed_window_reads_the_kernel_log_again_and_keeps_both_parts(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("boot\nready\n")
    config = {"smi_argvs": [["echo", "before"]], "kernel_log_argv": ["cat", str(log)]}
    files, errors = {}, {}
    soakwatch.watch(config, str(tmp_path), files, errors)
    with log.open("a") as handle:
        handle.write("NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n")
    config["smi_argvs"] = [["echo", "after"]]
    soakwatch.watch(config, str(tmp_path), files, errors)  # after the crash
    assert files["kernel-log.txt"] == (
        b"boot\nready\nNVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
    )
    assert files["smi.txt"] == b"after\n" and errors == {}
    config["kernel_log_argv"] = ["false"]
    soakwatch.watch(config, str(tmp_path), files, errors)
    assert errors["kernel_log"].startswith("false exited 1")
    config["kernel_log_argv"] = ["cat", str(log)]
    soakwatch.watch(config, str(tmp_path), files, errors)
    assert errors == {}  # read again: the earlier failure is no longer this window's word


def test_the_server_tree_holds_its_group_and_descendants_and_nothing_else():
    # A server in a group of its own (as the agent starts it) with a child in another group.
    script = "import os,subprocess,time;subprocess.Popen(['sleep','30'],start_new_session=True);"
    script += "time.sleep(30)"
    server = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        tree = soakwatch.process_tree(server.pid)
        while len(tree) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the polling interval while the child starts
            tree = soakwatch.process_tree(server.pid)
        assert server.pid in tree and len(tree) == 2, tree
        assert os.getpid() not in tree
    finally:
        os.killpg(server.pid, 9)
        for pid in soakwatch.process_tree(server.pid):
            if pid != server.pid:
                os.kill(pid, 9)
        server.wait()


def test_the_first_gpu_probe_that_works_is_used_and_tried_first_next_time():
    soakwatch._WORKED.clear()
    failing, working = ["false"], ["echo", "<nvidia_smi_log/>"]
    assert soakwatch.gpu_probe([failing, working]) == (b"<nvidia_smi_log/>\n", None)
    assert soakwatch._WORKED == {"smi": 1}
    output, error = soakwatch.gpu_probe([["/no/such/smi"]])
    assert output == b"" and error.startswith("/no/such/smi:")
    soakwatch._WORKED.clear()


def test_the_agent_config_orders_gpu_probes_and_passes_the_kernel_log_probe():
    vllm = next(doc for doc in builtin_profile_documents() if doc["name"] == "vllm")
    # Keys as a PostgreSQL jsonb column gives them back: shortest first (gpu_amd first).
    probes = dict(sorted(vllm["commands"]["probes"].items(), key=lambda i: (len(i[0]), i[0])))
    commands = {"serve": {"offload": ["vllm", "serve"]}, "bench": {"random": ["bench"]}}
    commands["probes"] = probes
    values = {"host_address": "127.0.0.1", "port": 8000, "python": "python3", "run_dir": "/r"}
    load = {"dataset": "random", "seed": 1, "num_prompts": 8}
    spec = {"load": load, "duration_h": 1, "window_min": 1}
    spec["limits"] = {"max_crashes": 0}
    paths = collector.SoakPaths("/r")
    config = collector.agent_config(spec, commands, values, paths)
    assert [argv[0] for argv in config["smi_argvs"]] == ["nvidia-smi", "amd-smi", "rocm-smi"]
    assert config["kernel_log_argv"][:2] == ["journalctl", "-k"]
    chosen = collector.agent_config(spec, commands, {**values, "gpu_probe": "gpu_rocm"}, paths)
    assert chosen["smi_argvs"][0][0] == "rocm-smi"


def python36() -> str | None:
    """A Python 3.6 that answers (a pyenv shim without that version selected does not)."""
    found = glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6"))
    for candidate in [shutil.which("python3.6"), *found]:
        if candidate and subprocess.run([candidate, "-V"], capture_output=True).returncode == 0:
            return candidate
    return None


RUNNERS = Path(__file__).resolve().parents[3] / "runners"


@pytest.mark.parametrize("name", ["soak/agent.py", "soak/watch.py", "remote/hostctl.py"])
def test_the_remote_files_parse_under_python_3_6(name):
    python = python36()
    if python is None:
        pytest.skip("no Python 3.6 on this machine")
    source = str(RUNNERS / name)
    compiled = subprocess.run(
        [python, "-c", f"import ast;ast.parse(open({source!r}).read())"],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
