"""GPU fitness read from nvidia-smi XML: real captures, and simhost's fault knobs."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from runners.adapters.errors import FormatProblem
from runners.adapters.gpu_health import parse_gpu_health_xml
from simhost import cli
from simhost.host.config import HostConfigError, host_config_from_dict
from simhost.host.smi import GpuLive, render
from tests.runners.adapters.golden import FIXTURES

NVIDIA = FIXTURES / "nvidia-smi"


def test_a_quiet_capture_is_fit():
    health = parse_gpu_health_xml((NVIDIA / "telegraf__a100-sxm4-v12.xml").read_text())
    assert health["gpus"][0] == {
        "index": 0,
        "pci_bus_id": "00000000:01:00.0",
        "memory_used_mib": 50.0,  # an idle A100: the driver's own context, under the tolerance
        "compute_processes": [],
        "slowdown_reasons": [],
        "ecc_uncorrectable": 0,
    }


def test_graphics_clients_are_not_foreign_jobs_but_compute_processes_are():
    a10g = parse_gpu_health_xml((NVIDIA / "telegraf__a10g.xml").read_text())
    assert a10g["gpus"][0]["compute_processes"] == []  # only Xorg (type G)
    ada = parse_gpu_health_xml((NVIDIA / "telegraf__rtx-4000-sff-ada-v13.xml").read_text())
    assert {p["pid"] for p in ada["gpus"][0]["compute_processes"]} >= {"4937"}


def test_simhost_reports_what_its_knobs_say():
    host = host_config_from_dict(
        {
            "gpu_health": {
                "foreign_processes": [
                    {"gpu": 1, "pid": 77, "name": "train.py", "used_memory_mib": 1000}
                ],
                "throttle_reasons": ["hw_thermal_slowdown"],
                "ecc_uncorrectable": 3,
            }
        },
        "test",
    )
    live = [GpuLive(1.0, 0.0)] * host.gpu_count
    gpus = parse_gpu_health_xml(render("nvidia-xml", host, live, datetime(2026, 1, 1)))["gpus"]
    assert gpus[1]["compute_processes"] == [
        {"pid": "77", "name": "train.py", "used_memory_mib": 1000.0}
    ]
    assert gpus[0]["compute_processes"] == []
    assert all(g["slowdown_reasons"] == ["hw_thermal_slowdown"] for g in gpus)
    assert all(g["ecc_uncorrectable"] == 3 for g in gpus)


def test_a_knob_with_an_unknown_reason_is_refused_naming_it():
    with pytest.raises(HostConfigError, match="throttle_reasons"):
        host_config_from_dict({"gpu_health": {"throttle_reasons": ["melting"]}}, "test")


def test_other_xml_is_refused():
    with pytest.raises(FormatProblem):
        parse_gpu_health_xml("<rocm/>")


def test_memory_held_without_a_visible_process_shows_as_used(tmp_path, capsys):
    config = tmp_path / "host.json"
    config.write_text(
        json.dumps({"gpu_health": {"held_memory": [{"gpu": 3, "used_memory_mib": 20000}]}})
    )
    argv = ["smi", "--host-config", str(config), "--format", "nvidia-xml"]
    assert cli.main([*argv, "--state-dir", str(tmp_path / "state")], environ={}) == 0
    gpus = parse_gpu_health_xml(capsys.readouterr().out)["gpus"]
    assert [g["compute_processes"] for g in gpus] == [[]] * len(gpus)
    assert gpus[3]["memory_used_mib"] == 20000.0
    assert gpus[2]["memory_used_mib"] < 10
