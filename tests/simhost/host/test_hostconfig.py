from __future__ import annotations

import json

import pytest

from simhost.host.config import (
    DEFAULT_HOST_PRESET,
    HOST_PRESETS,
    HostConfigError,
    host_config_from_dict,
    resolve_host_config,
    tier_report,
)


def test_the_default_is_the_documented_h100_host_with_a_512_gib_tier():
    host = resolve_host_config(None, None, {})
    assert host.name == DEFAULT_HOST_PRESET == "h100x8-cpu512"
    assert (host.gpu_vendor, host.gpu_count, host.gpu_memory_mib) == ("nvidia", 8, 81559)
    assert tier_report(host)["capacity_gib"] == 512.0


@pytest.mark.parametrize("name", sorted(HOST_PRESETS))
def test_every_preset_is_valid(name):
    host = resolve_host_config(None, name, {})
    assert host.name == name
    assert (host.cuda_version is None) == (host.gpu_vendor == "amd")


def test_the_tierless_preset_reports_no_tier():
    report = tier_report(resolve_host_config(None, "h100x8-no-tier", {}))
    assert report["present"] is False and report["capacity_gib"] is None


def test_a_config_file_overrides_its_base_preset_field_by_field(tmp_path):
    path = tmp_path / "host.json"
    path.write_text(
        json.dumps({"preset": "mi300x8-rocm", "vllm_version": "0.11.0", "gpu": {"count": 4}})
    )
    host = resolve_host_config(str(path), None, {})
    assert (host.gpu_model, host.gpu_count, host.vllm_version) == (
        "AMD Instinct MI300X",
        4,
        "0.11.0",
    )
    assert host.rocm_version == "6.3.1"


def test_the_environment_variable_is_used_when_no_flag_is_given(tmp_path):
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"vllm_version": "9.9.9"}))
    host = resolve_host_config(None, None, {"SIMHOST_HOST_CONFIG": str(path)})
    assert host.vllm_version == "9.9.9"


def test_the_flag_wins_over_the_environment_variable(tmp_path):
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"vllm_version": "9.9.9"}))
    host = resolve_host_config(None, "mi300x8-rocm", {"SIMHOST_HOST_CONFIG": str(path)})
    assert host.vllm_version == "0.20.1"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"gpu": {"count": "eight"}}, "gpu.count"),
        ({"gpu": {"vendor": "intel"}}, "gpu.vendor"),
        ({"gpu": {"count": 0}}, "gpu.count"),
        ({"offload_tier": {"present": True, "capacity_gib": -1}}, "capacity_gib"),
        ({"offload_tier": {"present": "yes"}}, "offload_tier.present"),
        ({"preset": "nope"}, "preset"),
        ({"vllm_version": 20}, "vllm_version"),
        (
            {
                "preset": "mi300x8-rocm",
                "gpu_health": {"amdgpu_events": [{"gpu": 1, "kind": "oops"}]},
            },
            "amdgpu_events\\[0\\]: field kind",
        ),
        (
            {"preset": "mi300x8-rocm", "gpu_health": {"amdgpu_events": [{"kind": "ras_fatal"}]}},
            "amdgpu_events\\[0\\]: missing field gpu",
        ),
        ({"gpu_health": {"throttle_reasons": ["too_hot"]}}, "gpu_health.throttle_reasons"),
    ],
)
def test_a_bad_field_is_refused_with_its_name(data, field):
    with pytest.raises(HostConfigError, match=field):
        host_config_from_dict(data, "host.json")


def test_an_unreadable_or_broken_file_names_the_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(HostConfigError, match=r"broken\.json"):
        resolve_host_config(str(broken), None, {})
    with pytest.raises(HostConfigError, match=r"missing\.json"):
        resolve_host_config(str(tmp_path / "missing.json"), None, {})


def test_config_and_preset_together_are_refused():
    with pytest.raises(HostConfigError, match="one, not both"):
        resolve_host_config("x.json", "mi300x8-rocm", {})


@pytest.mark.parametrize(
    ("preset", "gpu_health", "field"),
    [
        ("h100x8-cpu512", {"amdgpu_events": [{"gpu": 0, "kind": "ras_fatal"}]}, "amdgpu_events"),
        ("h100x8-cpu512", {"throttle_reasons": ["socket_thermal"]}, "throttle_reasons"),
        ("mi300x8-rocm", {"xid_events": [{"gpu": 0, "code": 79}]}, "xid_events"),
    ],
)
def test_a_fault_knob_the_hosts_gpu_tools_cannot_show_is_refused(preset, gpu_health, field):
    with pytest.raises(HostConfigError, match=f"gpu_health.{field} does not apply"):
        host_config_from_dict({"preset": preset, "gpu_health": gpu_health}, "host.json")


def test_an_amd_host_takes_amd_smi_violation_names_and_nvidia_ones():
    data = {"preset": "mi300x8-rocm", "gpu_health": {"throttle_reasons": ["ppt", "hw_slowdown"]}}
    assert host_config_from_dict(data, "t").gpu_health.throttle_reasons == ("ppt", "hw_slowdown")
