"""GPU fitness read from amd-smi: the real `metric` capture (an idle, healthy GPU), faulted
variants of it in amd-smi's own layout, the `process` layout of amdsmi_commands.py, malformed
input, and simhost's fault knobs."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.adapters.amd_health import parse_amd_health, parse_amd_processes
from runners.adapters.errors import FormatProblem
from simhost.host.config import host_config_from_dict
from simhost.host.smi import GpuLive, render
from tests.runners.adapters.golden import FIXTURES
from tests.runners.adapters.test_properties import JSON_VALUES

REAL_METRIC = (FIXTURES / "amd-smi" / "jkoudela__amd-smi_metric_json.sample.json").read_text()
NOT_ACTIVE = "NOT ACTIVE"


def metric(**changes) -> str:
    """The real capture with sections replaced (dotted keys reach into one: "throttle.x")."""
    entry = copy.deepcopy(json.loads(REAL_METRIC)[0])
    for dotted, value in changes.items():
        section, _, key = dotted.partition("__")
        if key:
            entry[section][key] = value
        else:
            entry[section] = value
    return json.dumps([entry])


def process_output(*process_lists) -> str:
    return json.dumps(
        [{"gpu": index, "process_list": listed} for index, listed in enumerate(process_lists)]
    )


def vllm_process(pid: int = 4242, name: str = "python3", vram_mib: int = 30000) -> dict:
    """One process as amdsmi_commands.py prints it in JSON (every amount in bytes)."""
    held = {"value": vram_mib * 2**20, "unit": "B"}
    return {
        "process_info": {
            "name": name,
            "pid": pid,
            "mem_usage": held,
            "usage": {"gfx": {"value": 1200, "unit": "ns"}, "enc": {"value": 0, "unit": "ns"}},
            "memory_usage": {
                "gtt_mem": {"value": 4096, "unit": "B"},
                "cpu_mem": {"value": 8192, "unit": "B"},
                "vram_mem": held,
            },
        }
    }


NONE_RUNNING = [{"process_info": "No running processes detected"}]


class TestTheRealCapture:
    def test_an_idle_gpu_is_read_as_the_nvidia_form_gives_it(self):
        health = parse_amd_health(REAL_METRIC)
        assert health == {
            "tool": "gpu-health",
            "source": "amd-smi-json",
            "gpus": [
                {
                    "index": 0,
                    "pci_bus_id": None,  # metric has no address: the inventory probe gives it
                    "memory_used_mib": 1758.0,
                    "compute_processes": [],
                    "slowdown_reasons": [],
                    "ecc_uncorrectable": 0,
                }
            ],
        }

    def test_power_throttle_status_alone_is_no_slowdown(self):
        # The real idle GPU says THROTTLED while it sits at 60 MHz with nothing to do.
        assert json.loads(REAL_METRIC)[0]["power"]["throttle_status"] == "THROTTLED"
        assert parse_amd_health(REAL_METRIC)["gpus"][0]["slowdown_reasons"] == []

    def test_the_gpu_data_envelope_of_newer_releases_reads_the_same(self):
        wrapped = json.dumps({"gpu_data": json.loads(REAL_METRIC)})
        assert parse_amd_health(wrapped) == parse_amd_health(REAL_METRIC)

    def test_the_inventory_bus_ids_name_the_gpus(self):
        health = parse_amd_health(REAL_METRIC, bus_ids={0: "0000:c1:00.0"})
        assert health["gpus"][0]["pci_bus_id"] == "0000:c1:00.0"


class TestViolations:
    @pytest.mark.parametrize("name", ["prochot", "socket_thermal", "vr_thermal", "hbm_thermal"])
    def test_an_active_thermal_or_prochot_violation_is_a_slowdown(self, name):
        text = metric(**{f"throttle__{name}_violation_status": "ACTIVE"})
        assert parse_amd_health(text)["gpus"][0]["slowdown_reasons"] == [name]

    def test_the_power_cap_is_reached_by_design_and_is_no_fault(self):
        text = metric(throttle__ppt_violation_status="ACTIVE")
        assert parse_amd_health(text)["gpus"][0]["slowdown_reasons"] == []

    def test_a_share_of_the_window_in_violation_counts_from_five_percent(self):
        busy = metric(throttle__hbm_thermal_violation_activity={"value": 12, "unit": "%"})
        brief = metric(throttle__hbm_thermal_violation_activity={"value": 2, "unit": "%"})
        assert parse_amd_health(busy)["gpus"][0]["slowdown_reasons"] == ["hbm_thermal"]
        assert parse_amd_health(brief)["gpus"][0]["slowdown_reasons"] == []

    def test_rocm_7_per_xcp_lists_count_when_any_partition_is_active(self):
        throttle = dict(json.loads(REAL_METRIC)[0]["throttle"])
        throttle["gfx_clk_below_host_limit_thermal_violation_status"] = {
            "XCP_0": [NOT_ACTIVE, NOT_ACTIVE, "N/A"],
            "XCP_1": [NOT_ACTIVE, "ACTIVE", "N/A"],
        }
        throttle["low_utilization_violation_status"] = {"XCP_0": ["ACTIVE", "ACTIVE"]}
        gpu = parse_amd_health(metric(throttle=throttle))["gpus"][0]
        assert gpu["slowdown_reasons"] == ["gfx_clk_below_host_limit_thermal"]

    def test_a_gpu_without_the_throttle_section_reports_none(self):
        assert parse_amd_health(metric(throttle="N/A"))["gpus"][0]["slowdown_reasons"] == []


class TestEcc:
    def test_uncorrectable_and_deferred_totals_add_up(self):
        text = metric(ecc__total_uncorrectable_count=2, ecc__total_deferred_count=1)
        assert parse_amd_health(text)["gpus"][0]["ecc_uncorrectable"] == 3

    def test_the_blocks_count_when_the_total_could_not_be_read(self):
        blocks = {
            "UMC": {"correctable_count": 9, "uncorrectable_count": 4, "deferred_count": 0},
            "GFX": {"correctable_count": 0, "uncorrectable_count": "N/A", "deferred_count": 1},
        }
        text = metric(ecc__total_uncorrectable_count="N/A", ecc_blocks=blocks)
        assert parse_amd_health(text)["gpus"][0]["ecc_uncorrectable"] == 5

    def test_no_readable_count_is_none_never_zero(self):
        text = metric(ecc="N/A", ecc_blocks="N/A")
        assert parse_amd_health(text)["gpus"][0]["ecc_uncorrectable"] is None


class TestProcesses:
    def test_a_listed_process_is_a_compute_process_with_its_vram(self):
        listed = parse_amd_processes(process_output(NONE_RUNNING, [vllm_process()]))
        assert listed == {
            0: [],
            1: [{"pid": "4242", "name": "python3", "used_memory_mib": 30000.0}],
        }

    def test_processes_join_the_metric_by_gpu_index(self):
        two_gpus = json.loads(REAL_METRIC) * 2
        two_gpus[1] = dict(two_gpus[1], gpu=1)
        processes = process_output(NONE_RUNNING, [vllm_process(pid=7)])
        gpus = parse_amd_health(json.dumps(two_gpus), processes)["gpus"]
        assert [[p["pid"] for p in g["compute_processes"]] for g in gpus] == [[], ["7"]]

    def test_another_users_process_has_no_name_but_is_still_foreign(self):
        hidden = vllm_process(name="N/A")
        (process,) = parse_amd_processes(process_output([hidden]))[0]
        assert (process["pid"], process["name"]) == ("4242", None)

    def test_without_the_vram_breakdown_the_total_memory_counts(self):
        older = vllm_process(vram_mib=512)
        del older["process_info"]["memory_usage"]
        (process,) = parse_amd_processes(process_output([older]))[0]
        assert process["used_memory_mib"] == 512.0


@pytest.mark.parametrize(
    ("metric_text", "processes", "named"),
    [
        ("not json", None, "amd-smi metric output"),
        ('{"gpus": []}', None, "neither a list of GPUs"),
        (
            metric(ecc__total_uncorrectable_count="many"),
            None,
            "gpu[0].ecc.total_uncorrectable_count",
        ),
        (metric(mem_usage__used_vram={"value": "x", "unit": "MB"}), None, "used_vram"),
        (
            metric(throttle__vr_thermal_violation_status=True),
            None,
            "gpu[0].throttle.vr_thermal_violation_status",
        ),
        (REAL_METRIC, json.dumps([{"gpu": 0, "process_list": "none"}]), "gpu[0].process_list"),
        (REAL_METRIC, process_output([{"process_info": 3}]), "process_list[0].process_info"),
        (REAL_METRIC, process_output([{"pid": 3}]), "amd-smi process output"),
    ],
)
def test_malformed_output_is_refused_naming_the_output_and_the_field(metric_text, processes, named):
    with pytest.raises(FormatProblem, match=named.replace("[", r"\[").replace("]", r"\]")):
        parse_amd_health(metric_text, processes)


SECTIONS = st.sampled_from(["gpu", "mem_usage", "ecc", "ecc_blocks", "throttle", "power"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(section=SECTIONS, value=JSON_VALUES, processes=JSON_VALUES)
def test_any_mutation_gives_clean_numbers_or_a_format_problem(section, value, processes):
    entry = dict(json.loads(REAL_METRIC)[0], **{section: value})
    try:
        health = parse_amd_health(json.dumps([entry]), json.dumps(processes))
    except FormatProblem:
        return
    json.dumps(health, allow_nan=False)  # no NaN or Infinity reaches the contract check
    for gpu in health["gpus"]:
        assert gpu["memory_used_mib"] is None or math.isfinite(gpu["memory_used_mib"])


def test_simhost_reports_what_its_knobs_say_as_amd_smi_would():
    host = host_config_from_dict(
        {
            "preset": "mi300x8-rocm",
            "gpu_health": {
                "foreign_processes": [
                    {"gpu": 1, "pid": 77, "name": "train.py", "used_memory_mib": 1000}
                ],
                "throttle_reasons": ["hw_thermal_slowdown", "prochot"],
                "ecc_uncorrectable": 3,
            },
        },
        "test",
    )
    live = [GpuLive(1.0, 0.0)] * host.gpu_count
    text = render("amd-smi-json", host, live, None)
    gpus = parse_amd_health(text, render("amd-smi-process", host, live, None))["gpus"]
    assert gpus[1]["compute_processes"] == [
        {"pid": "77", "name": "train.py", "used_memory_mib": 1000.0}
    ]
    assert gpus[0]["compute_processes"] == []
    # nvidia-smi's name maps to amd-smi's nearest violation; amd-smi's own names pass through.
    assert all(g["slowdown_reasons"] == ["prochot", "socket_thermal"] for g in gpus)
    assert all(g["ecc_uncorrectable"] == 3 for g in gpus)
    assert json.loads(text)[0]["power"]["throttle_status"] == "THROTTLED"


def test_a_healthy_simhost_amd_host_is_fit():
    host = host_config_from_dict({"preset": "mi300x8-rocm"}, "test")
    live = [GpuLive(1.0, 0.0)] * host.gpu_count
    health = parse_amd_health(
        render("amd-smi-json", host, live, None), render("amd-smi-process", host, live, None)
    )
    assert {
        (len(g["compute_processes"]), tuple(g["slowdown_reasons"]), g["ecc_uncorrectable"])
        for g in health["gpus"]
    } == {(0, (), 0)}
