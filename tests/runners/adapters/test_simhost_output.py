"""simhost's own outputs read by the same adapters as real vLLM's and real smi tools'."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from runners import adapters
from simhost.host.config import HOST_PRESETS, resolve_host_config
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


FORMATS = {"nvidia": ["nvidia-xml", "nvidia-csv"], "amd": ["rocm-json", "amd-smi-json"]}
PRESET_FORMATS = [
    (name, fmt)
    for name in sorted(HOST_PRESETS)
    for fmt in FORMATS[resolve_host_config(None, name, {}).gpu_vendor]
]


@pytest.mark.parametrize(("preset", "fmt"), PRESET_FORMATS)
def test_simhost_smi_reads_as_a_gpu_inventory(preset, fmt):
    host = resolve_host_config(None, preset, {})
    inventory = adapters.parse(
        simhost("smi", "--host-preset", preset, "--format", fmt), tool="gpu-inventory"
    )
    assert len(inventory["gpus"]) == host.gpu_count
    assert all(gpu["memory_total_mib"] == host.gpu_memory_mib for gpu in inventory["gpus"])
    # `amd-smi metric` carries no product name (like the real capture); the others do.
    names = {gpu["name"] for gpu in inventory["gpus"]}
    assert names == ({None} if fmt == "amd-smi-json" else {host.gpu_model})
    assert json.dumps(inventory)  # strict, JSON-able
