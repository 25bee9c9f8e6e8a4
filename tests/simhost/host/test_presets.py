"""Every host preset served and inventoried: the GPU figures its engine runs on, the tier its
server accepts, and the G1 facts Tollgate reads from its probes (the same adapters and gathering
as a real host's)."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from gates.decisions.g1 import decide_g1
from gates.decisions.gathering import gather_g1
from runners import adapters
from runners.results import probe_facts
from simhost.engine.presets import GPUS
from simhost.host.config import HOST_PRESETS, HostConfig, resolve_host_config
from simhost.server.args import UsageError, engine_config
from tests.gates.decisions.test_g1 import g1_spec
from tests.simhost.conftest import run_simhost, wait_until

GIB = 1 << 30
# The GPUS entry (published figures) each preset's engine must run on.
PRESET_GPUS = {
    "h100x8-cpu512": "H100-SXM5-80GB",
    "h100x8-no-tier": "H100-SXM5-80GB",
    "h200x8-cpu1024": "H200-SXM-141GB",
    "mi300x8-rocm": "MI300X",
    "mi308x8-rocm": "MI308X",
}
PRESETS = sorted(HOST_PRESETS)


def test_every_preset_names_the_gpu_it_runs_on():
    assert set(PRESET_GPUS) == set(HOST_PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_a_server_on_each_preset_runs_on_its_gpus_published_figures(name):
    host = resolve_host_config(None, name, {})
    config = engine_config({"model_preset": "sim-480b-tp8"}, host)
    assert config.preset.platform.gpu is GPUS[PRESET_GPUS[name]]


def test_the_h200_preset_reads_hbm_faster_and_the_mi308x_computes_slower_than_the_h100():
    platform = {
        name: engine_config({}, resolve_host_config(None, name, {})).preset.platform
        for name in ("h100x8-cpu512", "h200x8-cpu1024", "mi300x8-rocm", "mi308x8-rocm")
    }
    assert platform["h200x8-cpu1024"].gpu.hbm_bytes_per_s == 4.8e12
    assert platform["h200x8-cpu1024"].hbm > platform["h100x8-cpu512"].hbm
    assert platform["mi308x8-rocm"].flops < platform["h100x8-cpu512"].flops
    assert platform["mi308x8-rocm"].flops < platform["mi300x8-rocm"].flops


@pytest.mark.parametrize("name", ["h200x8-cpu1024", "mi308x8-rocm"])
def test_the_new_presets_tier_keeps_up_with_eight_host_links(name):
    host = resolve_host_config(None, name, {})
    links = 8 * GPUS[PRESET_GPUS[name]].link_bytes_per_s
    assert host.offload_tier.bandwidth_gib_s == pytest.approx(links / GIB, abs=0.05)
    config = engine_config({"kv_offloading_size": 64.0}, host)
    assert config.offload_bytes_per_s == pytest.approx(links, rel=1e-3)


@pytest.mark.parametrize("name", PRESETS)
def test_each_preset_serves_offload_up_to_its_tier_and_refuses_more(name):
    host = resolve_host_config(None, name, {})
    tier = host.offload_tier
    if not tier.present:
        with pytest.raises(UsageError, match="no offload tier"):
            engine_config({"kv_offloading_size": 1.0}, host)
        return
    assert engine_config({"kv_offloading_size": tier.capacity_gib}, host).kv_offloading_gib == (
        tier.capacity_gib
    )
    with pytest.raises(UsageError, match="exceeds the host's"):
        engine_config({"kv_offloading_size": tier.capacity_gib + 1}, host)


def _probe_outputs(name: str, host: HostConfig, state_dir) -> dict[str, str]:
    probes = {
        "gpu_" + host.gpu_vendor: ["smi"],
        "offload_tier": ["tier", "--json"],
        "meminfo": ["meminfo"],
        "vllm_version": ["version"],
    }
    if host.gpu_vendor == "amd":
        probes["rocm_version"] = ["smi", "--format", "rocm-version"]
    outputs = {}
    for probe, args in probes.items():
        done = run_simhost([*args, "--host-preset", name], state_dir)
        assert done.returncode == 0, done.stderr
        outputs[probe] = done.stdout
    return outputs


def _expect(host: HostConfig) -> dict:
    tier = host.offload_tier
    return {
        "gpu_vendor": host.gpu_vendor,
        "gpu_model_pattern": f"^{re.escape(host.gpu_model)}$",
        "gpu_count": host.gpu_count,
        "gpu_memory_min_gib": host.gpu_memory_mib // 1024,
        "driver_min": None,
        "cuda_min": host.cuda_version,
        "rocm_min": host.rocm_version,
        "vllm_min": host.vllm_version,
        "host_memory_min_gib": host.host_memory_gib,
        "offload_tier": {"required": tier.present, "min_capacity_gib": tier.capacity_gib},
        "free_disk_min_gib": None,
        "kernel_pattern": None,
    }


@pytest.mark.parametrize("name", PRESETS)
def test_each_presets_probes_give_the_g1_facts_of_its_inventory(name, tmp_path):
    host = resolve_host_config(None, name, {})
    outputs = _probe_outputs(name, host, tmp_path)
    steps = [{"facts": probe_facts(probe, text)} for probe, text in outputs.items()]
    facts = gather_g1(steps)
    gpus = facts["gpu_inventory"]["gpus"]
    assert [gpu["name"] for gpu in gpus] == [host.gpu_model] * host.gpu_count
    assert {gpu["memory_total_mib"] for gpu in gpus} == {host.gpu_memory_mib}
    assert facts["host_memory_bytes"] == host.host_memory_gib * GIB
    assert facts["offload_tier"]["capacity_gib"] == host.offload_tier.capacity_gib
    decision = decide_g1(g1_spec(**_expect(host)), facts)
    assert decision["verdict"] == "pass", decision["reasons"]
    other = "MI300X" if host.gpu_vendor == "nvidia" else "H100"
    decision = decide_g1(g1_spec(**dict(_expect(host), gpu_model_pattern=other)), facts)
    assert decision["verdict"] == "fail"


@pytest.mark.parametrize("name", ["h200x8-cpu1024", "mi308x8-rocm"])
def test_the_new_presets_smi_shows_the_real_tools_model_identity(name, tmp_path):
    if name.startswith("h200"):
        out = run_simhost(["smi", "--host-preset", name, "--format", "nvidia-csv"], tmp_path)
        assert "NVIDIA H200, 143771 MiB" in out.stdout  # as the real H200 capture prints it
        return
    out = run_simhost(["smi", "--host-preset", name], tmp_path)
    cards = json.loads(out.stdout)
    # pci.ids: 1002:74a2 is the Instinct MI308X (74a1 the MI300X)
    assert {cards[f"card{i}"]["Device ID"] for i in range(8)} == {"0x74a2"}
    assert cards["card0"]["Device Name"] == "AMD Instinct MI308X"


def test_every_preset_is_offered_by_the_command_line(tmp_path):
    help_text = " ".join(run_simhost(["smi", "--help"], tmp_path).stdout.split())
    assert all(name in help_text for name in PRESETS)


def _reserved_mib(name: str, state_dir) -> set[float] | None:
    out = run_simhost(["smi", "--host-preset", name], state_dir).stdout
    used = {gpu["memory_used_mib"] for gpu in adapters.parse(out, tool="gpu-inventory")["gpus"]}
    return used if min(used) > 1 else None


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_each_preset_serves_and_its_smi_shows_the_memory_vllm_reserves(name, serve):
    host = resolve_host_config(None, name, {})
    offload = ["--kv-offloading-size", "64"] if host.offload_tier.present else []
    server = serve("--host-preset", name, "--model-preset", "sim-480b-tp8", *offload)
    body = json.dumps({"model": "sim-480b-tp8", "prompt": "hello there", "max_tokens": 4})
    request = urllib.request.Request(
        server.url + "/v1/completions", body.encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.load(response)["usage"]["completion_tokens"] == 4
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        scrape = adapters.parse(response.read(), tool="vllm-metrics")
    assert scrape["cache_config"]["kv_offloading_size"] == (64.0 if offload else None)
    used = wait_until(lambda: _reserved_mib(name, server.state_dir), 10, what="memory in smi")
    # --gpu-memory-utilization 0.9 of each GPU, as vLLM reserves it at start
    assert sorted(used) == [pytest.approx(0.9 * host.gpu_memory_mib, abs=1)]
