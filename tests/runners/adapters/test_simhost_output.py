"""simhost's own outputs read by the same adapters as real vLLM's and real smi tools'."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from runners import adapters
from tests.simhost.conftest import REPO, start_server

pytestmark = pytest.mark.slow


def simhost(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "simhost", *args],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


@pytest.fixture
def server(tmp_path):
    running = start_server(
        tmp_path,
        "--scenario",
        "offload-helps",
        "--served-model-name",
        "m",
        "--kv-offloading-size",
        "64",
    )
    yield running
    running.stop()


def test_a_simhost_bench_result_reads_as_a_vllm_bench_result(server, tmp_path):
    simhost(
        "bench",
        "--base-url",
        server.url,
        "--model",
        "m",
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--num-prompts",
        "8",
        "--max-concurrency",
        "4",
        "--save-result",
        "--result-dir",
        str(tmp_path),
        "--result-filename",
        "result.json",
    )
    text = (tmp_path / "result.json").read_text()
    assert adapters.detect(text) == "vllm-bench"
    run = adapters.parse(text)["runs"][0]
    assert (run["completed"], run["failed"], run["max_concurrency"]) == (8, 0, 4)
    assert run["ttft_ms"]["median"] > 0 and run["output_throughput"] > 0


def test_simhost_metrics_read_as_vllm_metrics_with_the_arm_it_runs(server):
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        scrape = adapters.parse(response.read(), tool="vllm-metrics")
    assert scrape["cache_config"]["enable_prefix_caching"] is True
    assert scrape["cache_config"]["kv_offloading_size"] == 64.0


@pytest.mark.parametrize("fmt", ["nvidia-xml", "nvidia-csv", "rocm-json", "amd-smi-json"])
def test_simhost_smi_reads_as_a_gpu_inventory(fmt):
    preset = "mi300x8-rocm" if fmt in ("rocm-json", "amd-smi-json") else "h100x8-cpu512"
    inventory = adapters.parse(
        simhost("smi", "--host-preset", preset, "--format", fmt), tool="gpu-inventory"
    )
    assert len(inventory["gpus"]) == 8
    expected_mib = {"h100x8-cpu512": 81559, "mi300x8-rocm": 196288}[preset]
    assert all(gpu["memory_total_mib"] == expected_mib for gpu in inventory["gpus"])
    # `amd-smi metric` carries no product name (like the real capture); the others do.
    assert all(gpu["name"] for gpu in inventory["gpus"]) is (fmt != "amd-smi-json")
    assert json.dumps(inventory)  # strict, JSON-able
