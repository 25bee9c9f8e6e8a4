"""simhost smi output against the structure of real nvidia-smi, rocm-smi and amd-smi captures."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import datetime

import pytest

from simhost.host.config import host_config_from_dict, resolve_host_config
from simhost.host.kernellog import render_kernel_log
from simhost.host.nvidiasmi import csv_fields
from simhost.host.smi import (
    GpuLive,
    SmiQueryError,
    SmiUnavailableError,
    render,
)
from tests.simhost.conftest import FIXTURES

NOW = datetime(2026, 11, 30, 12, 0, 0)
NVIDIA = resolve_host_config(None, "h100x8-cpu512", {})
AMD = resolve_host_config(None, "mi300x8-rocm", {})


def _live(host, used=70000.0, util=42.0):
    return [GpuLive(used, util)] * host.gpu_count


def _element_paths(element, prefix=""):
    found = set()
    for child in element:
        path = prefix + "/" + child.tag
        found.add(path)
        found |= _element_paths(child, path)
    return found


def _real_xml_paths():
    paths = set()
    for name in ("telegraf__a100-sxm4-v12.xml", "telegraf__a10g.xml"):
        paths |= _element_paths(ET.parse(FIXTURES / name).getroot())
    return paths


def test_nvidia_xml_uses_only_elements_real_nvidia_smi_writes():
    text = render("nvidia-xml", NVIDIA, _live(NVIDIA), NOW)
    assert text.splitlines()[1] == '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">'
    ours = _element_paths(ET.fromstring(text.split("\n", 2)[2]))
    assert ours <= _real_xml_paths()


def test_nvidia_xml_reports_the_configured_inventory_and_live_memory():
    root = ET.fromstring(
        render("nvidia-xml", NVIDIA, _live(NVIDIA, used=70000), NOW).split("\n", 2)[2]
    )
    gpus = root.findall("gpu")
    assert len(gpus) == 8 == int(root.findtext("attached_gpus"))
    assert root.findtext("driver_version") == "550.54.15"
    assert root.findtext("cuda_version") == "12.4"
    assert gpus[0].findtext("product_name") == "NVIDIA H100 80GB HBM3"
    assert gpus[0].findtext("fb_memory_usage/total") == "81559 MiB"
    assert gpus[0].findtext("fb_memory_usage/used") == "70000 MiB"
    assert gpus[0].findtext("utilization/gpu_util") == "42 %"
    assert len({g.findtext("uuid") for g in gpus}) == 8


def _real_csv_header():
    capture = (
        FIXTURES / "nvidia_gpu_exporter__capture__linux-x86_64__nvidia-h200__590.48.01.txt"
    ).read_text()
    section = capture.split("# idle :: query-gpu")[1]
    header = next(line for line in section.splitlines() if line.startswith("timestamp, "))
    return {column.split(" [")[0]: column for column in header.split(", ")}


def test_every_csv_field_has_the_header_and_unit_real_nvidia_smi_prints():
    real = _real_csv_header()
    for name, (_, unit) in csv_fields(NVIDIA, 0, GpuLive(1.0, 0.0), NOW).items():
        assert real[name] == name + (f" [{unit}]" if unit else "")


def test_csv_rows_carry_units_unless_nounits():
    query = "index,name,memory.total,memory.used,utilization.gpu"
    with_units = render("nvidia-csv", NVIDIA, _live(NVIDIA), NOW, query).splitlines()
    assert (
        with_units[0] == "index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]"
    )
    assert with_units[1] == "0, NVIDIA H100 80GB HBM3, 81559 MiB, 70000 MiB, 42 %"
    bare = render("nvidia-csv", NVIDIA, _live(NVIDIA), NOW, query, ["noheader", "nounits"])
    assert bare.splitlines()[0] == "0, NVIDIA H100 80GB HBM3, 81559, 70000, 42"
    assert len(bare.splitlines()) == 8


def test_an_unknown_query_field_is_refused_as_nvidia_smi_does():
    with pytest.raises(
        SmiQueryError, match=re.escape('Field "bogus" is not a valid field to query.')
    ):
        render("nvidia-csv", NVIDIA, _live(NVIDIA), NOW, "index,bogus")


def test_rocm_json_uses_only_keys_real_rocm_smi_writes():
    payload = json.loads(render("rocm-json", AMD, _live(AMD), NOW))
    real = set()
    for name in ("telegraf__mi100_rocm602.json", "telegraf__rx6700xt_rocm612.json"):
        real |= set(json.loads((FIXTURES / name).read_text())["card0"])
    assert sorted(payload) == sorted([f"card{i}" for i in range(8)] + ["system"])
    assert set(payload["card0"]) <= real
    assert all(isinstance(v, str) for v in payload["card0"].values())
    assert payload["system"]["Driver version"] == "6.8.5"
    assert payload["card3"]["Card Series"] == "AMD Instinct MI300X"
    assert int(payload["card0"]["VRAM Total Used Memory (B)"]) == 70000 * 2**20


def _json_paths(value, prefix=""):
    found = set()
    if isinstance(value, dict) and set(value) != {"value", "unit"}:
        for key, child in value.items():
            found.add(prefix + "/" + key)
            found |= _json_paths(child, prefix + "/" + key)
    return found


def test_amd_smi_json_is_a_bare_list_with_real_amd_smi_keys():
    payload = json.loads(render("amd-smi-json", AMD, _live(AMD), NOW))
    real = json.loads((FIXTURES / "jkoudela__amd-smi_metric_json.sample.json").read_text())
    assert isinstance(payload, list) and len(payload) == 8
    assert _json_paths(payload[0]) <= _json_paths(real[0])
    assert payload[0]["mem_usage"]["used_vram"]["unit"] == "MB"
    assert payload[2]["gpu"] == 2


@pytest.mark.parametrize(
    ("fmt", "host"),
    [
        ("nvidia-xml", AMD),
        ("nvidia-csv", AMD),
        ("rocm-json", NVIDIA),
        ("amd-smi-json", NVIDIA),
        ("amd-smi-process", NVIDIA),
    ],
)
def test_a_tool_of_the_other_gpu_vendor_is_not_found(fmt, host):
    with pytest.raises(SmiUnavailableError, match="command not found"):
        render(fmt, host, _live(host), NOW)


def test_the_rocm_version_file_holds_the_configured_rocm_version():
    assert render("rocm-version", AMD, _live(AMD), NOW).startswith("6.3.1")


def test_amd_smi_process_lists_foreign_processes_in_amdsmis_layout():
    foreign = {"gpu": 1, "pid": 9, "name": "train.py", "used_memory_mib": 2}
    host = host_config_from_dict(
        {"preset": "mi300x8-rocm", "gpu_health": {"foreign_processes": [foreign]}}, "t"
    )
    payload = json.loads(render("amd-smi-process", host, _live(host), NOW))
    assert [entry["gpu"] for entry in payload] == list(range(8))
    assert payload[0]["process_list"] == [{"process_info": "No running processes detected"}]
    (listed,) = payload[1]["process_list"]
    info = listed["process_info"]
    assert (info["name"], info["pid"]) == ("train.py", 9)
    assert info["memory_usage"]["vram_mem"] == {"value": 2 * 2**20, "unit": "B"}
    assert set(info) == {"name", "pid", "mem_usage", "usage", "memory_usage"}


def test_amd_smi_metric_shows_the_throttle_and_ecc_knobs_in_real_keys():
    host = host_config_from_dict(
        {
            "preset": "mi300x8-rocm",
            "gpu_health": {"throttle_reasons": ["hw_thermal_slowdown"], "ecc_uncorrectable": 4},
        },
        "t",
    )
    (gpu, *_) = json.loads(render("amd-smi-json", host, _live(host), NOW))
    real = json.loads((FIXTURES / "jkoudela__amd-smi_metric_json.sample.json").read_text())[0]
    assert set(gpu["throttle"]) == set(real["throttle"])
    assert gpu["throttle"]["socket_thermal_violation_status"] == "ACTIVE"
    assert gpu["throttle"]["ppt_violation_status"] == "NOT ACTIVE"
    assert gpu["ecc"]["total_uncorrectable_count"] == 4
    assert gpu["ecc_blocks"]["UMC"]["uncorrectable_count"] == 4


def test_the_kernel_log_carries_each_vendors_own_driver_lines():
    amd = host_config_from_dict(
        {
            "preset": "mi300x8-rocm",
            "gpu_health": {"amdgpu_events": [{"gpu": 2, "kind": "ras_fatal"}]},
        },
        "t",
    )
    log = render_kernel_log(amd, NOW.astimezone())
    (line,) = [line for line in log.splitlines() if "amdgpu" in line]
    # The address rocm-smi reports for GPU 2, so the check can name the GPU.
    pci = json.loads(render("rocm-json", amd, _live(amd), NOW))["card2"]["PCI Bus"]
    assert f"amdgpu {pci}: {{1}}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT)" in line
    assert "NVRM" not in log
    nvidia = host_config_from_dict({"gpu_health": {"xid_events": [{"gpu": 0, "code": 79}]}}, "t")
    assert "NVRM: Xid (PCI:0000:18:00): 79," in render_kernel_log(nvidia, NOW.astimezone())
