"""The command line: probes, one-line errors, and Python 3.9 compatibility."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from simhost.host.statefile import ServerState, write_state
from tests.simhost.conftest import REPO, run_simhost

PYTHON39 = Path("/root/.pyenv/versions/3.9.18/bin/python")
LMCACHE_MP = '{"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both"}'


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--port", "abc"],
        ["serve", "--kv-offloading-size", "-1"],
        ["serve", "--host-preset", "h100x8-no-tier", "--kv-offloading-size", "64"],
        ["serve", "--kv-offloading-size", "100000"],
        ["serve", "--fault-error-rate", "2"],
        ["serve", "--kv-transfer-config", "{not json"],
        ["serve", "--kv-transfer-config", '{"kv_connector": "NixlConnector"}'],
        ["serve", "--host-preset", "h100x8-no-tier", "--kv-transfer-config", LMCACHE_MP],
        ["serve", "--max-model-len", "999999999"],
        ["serve", "--time-scale", "0"],
        ["serve", "--host-preset", "nope"],
        ["bench", "--dataset-name", "sharegpt"],
        ["bench", "--metric-percentiles", "ninety"],
        ["bench", "--percentile-metrics", "ttft,latency"],
        ["bench", "--num-prompts", "0"],
        ["smi", "--format", "nvidia-csv", "--query-gpu", "bogus"],
        ["frobnicate"],
    ],
)
def test_bad_flags_get_one_line_and_no_traceback(args, tmp_path):
    done = run_simhost(args, tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_help_says_it_is_a_test_double(tmp_path):
    for args in (["--help"], ["serve", "--help"]):
        assert "test double" in run_simhost(args, tmp_path).stdout.lower().replace("\n", " ")


def test_version_prints_the_vllm_version_of_the_host_config(tmp_path):
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"vllm_version": "0.11.1"}))
    assert run_simhost(["version"], tmp_path).stdout == "0.20.1\n"
    assert run_simhost(["version", "--host-config", str(host)], tmp_path).stdout == "0.11.1\n"


def test_tier_reports_the_offload_tier_as_json(tmp_path):
    present = json.loads(run_simhost(["tier", "--json"], tmp_path).stdout)
    absent = json.loads(
        run_simhost(["tier", "--json", "--host-preset", "h100x8-no-tier"], tmp_path).stdout
    )
    assert present == {
        "present": True,
        "kind": "cpu-dram",
        "capacity_gib": 512.0,
        "bandwidth_gib_s": 100.0,
    }
    assert absent["present"] is False


def test_smi_picks_the_vendor_tool_and_reads_live_servers(tmp_path):
    state = tmp_path / "state"
    write_state(str(state), ServerState(os.getpid(), 8000, [50000.0] * 8, [77.0] * 8))
    xml = run_simhost(["smi"], state).stdout
    assert "<used>50000 MiB</used>" in xml and "<gpu_util>77 %</gpu_util>" in xml
    rocm = json.loads(run_simhost(["smi", "--host-preset", "mi300x8-rocm"], state).stdout)
    assert rocm["card0"]["GPU use (%)"] == "77"
    missing = run_simhost(["smi", "--format", "rocm-json"], state)
    assert missing.returncode == 127 and "command not found" in missing.stderr


def test_meminfo_reports_the_configured_host_memory(tmp_path):
    first = run_simhost(["meminfo"], tmp_path).stdout.splitlines()[0]
    assert first.split() == ["MemTotal:", str(2048 * 1024 * 1024), "kB"]


def test_scenarios_print_the_exact_flags_of_each_arm(tmp_path):
    out = run_simhost(["scenarios", "offload-helps"], tmp_path).stdout
    assert "--kv-offloading-size 256.0" in out and "--no-enable-prefix-caching" in out
    assert "--dataset-name cold_recovery" in out


@pytest.mark.skipif(not PYTHON39.exists(), reason="no Python 3.9 interpreter on this machine")
def test_the_package_compiles_under_python_3_9():
    done = subprocess.run(
        [str(PYTHON39), "-m", "compileall", "-q", "simhost"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(not PYTHON39.exists(), reason="no Python 3.9 interpreter on this machine")
@pytest.mark.parametrize(
    "args",
    [
        ["version"],
        ["tier", "--json"],
        ["smi", "--format", "nvidia-xml"],
        ["smi", "--host-preset", "mi300x8-rocm", "--format", "amd-smi-json"],
        ["smi", "--host-preset", "mi300x8-rocm", "--format", "amd-smi-process"],
        ["dmesg", "--host-preset", "mi300x8-rocm"],
    ],
)
def test_the_probes_run_on_a_bare_python_3_9(args, tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
        "SIMHOST_STATE_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [str(PYTHON39), "-m", "simhost", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout


@pytest.mark.skipif(not PYTHON39.exists(), reason="no Python 3.9 interpreter on this machine")
def test_the_bench_runs_on_a_bare_python_3_9(serve, tmp_path):
    server = serve("--time-scale", "0.01")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    args = ["bench", "--base-url", server.url, "--num-prompts", "6", "--random-input-len", "16"]
    args += ["--random-output-len", "3", "--save-result", "--result-filename", "r.json"]
    done = subprocess.run(
        [str(PYTHON39), "-m", "simhost", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["completed"] == 6


@pytest.mark.skipif(not PYTHON39.exists(), reason="no Python 3.9 interpreter on this machine")
def test_serve_without_aiohttp_says_what_to_install(tmp_path):
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [str(PYTHON39), "-m", "simhost", "serve"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "pip install aiohttp prometheus_client" in done.stderr


ALLOWED_THIRD_PARTY = {"aiohttp", "prometheus_client", "tokenizers"}


def test_simhost_imports_nothing_from_the_rest_of_tollgate():
    import ast
    import sys as system

    for path in sorted((REPO / "simhost").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                allowed = root == "simhost" or root in ALLOWED_THIRD_PARTY
                allowed = allowed or root in system.stdlib_module_names
                assert allowed, f"{path.name} imports {root}"
