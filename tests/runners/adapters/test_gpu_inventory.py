"""gpu-inventory: CSV variants, amd-smi envelopes, rocm-smi spellings, hostile XML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.adapters import AdapterError, detect, parse
from runners.adapters.gpu_inventory import parse_gpu_inventory
from runners.adapters.nvidia_smi import QUERY_GPU_FIELDS

FIXTURES = Path(__file__).parents[2] / "fixtures"
AMD_METRIC = json.loads(
    (FIXTURES / "amd-smi/jkoudela__amd-smi_metric_json.sample.json").read_text()
)
ROCM = json.loads((FIXTURES / "rocm-smi/telegraf__rx6700xt_rocm612.json").read_text())
A10G = (FIXTURES / "nvidia-smi/telegraf__a10g.xml").read_text()

HEADER = (
    "index, name, uuid, pci.bus_id, driver_version, "
    "memory.total [MiB], memory.used [MiB], utilization.gpu [%]"
)
ROWS = (
    "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 00000000:18:00.0, 550.54.15, 81559 MiB, 1 MiB, 0 %\n"
    "1, NVIDIA H100 80GB HBM3, GPU-bbbb, 00000000:2A:00.0, 550.54.15, 81559 MiB, 70000 MiB, 97 %\n"
)


def _gpus(text: str) -> list[tuple]:
    result = parse_gpu_inventory(text)
    return [
        (g["index"], g["memory_total_mib"], g["memory_used_mib"], g["utilization_pct"])
        for g in result["gpus"]
    ]


def test_csv_with_header_and_units_without_units_and_without_header_read_the_same():
    nounits = ROWS.replace(" MiB", "").replace(" %", "")
    expected = [(0, 81559.0, 1.0, 0.0), (1, 81559.0, 70000.0, 97.0)]
    assert _gpus(f"{HEADER}\n{ROWS}") == expected
    assert _gpus(f"{HEADER}\n{nounits}") == expected
    assert _gpus(ROWS) == expected
    assert _gpus(nounits) == expected
    assert len(QUERY_GPU_FIELDS) == 8  # the headerless layout the probes must ask for


def test_a_csv_row_with_the_wrong_number_of_values_is_refused():
    with pytest.raises(AdapterError, match="CSV row 3 has 7 values for 8 fields"):
        parse_gpu_inventory(f"{HEADER}\n{ROWS}0, a, b, c, d, e, f\n")


def test_csv_placeholders_are_null_and_garbage_is_refused():
    missing = ROWS.replace("0 %", "[N/A]").replace(
        "1 MiB", "[Requested functionality has been deprecated]"
    )
    gpu = parse_gpu_inventory(f"{HEADER}\n{missing}")["gpus"][0]
    assert (gpu["utilization_pct"], gpu["memory_used_mib"]) == (None, None)
    with pytest.raises(AdapterError, match="row 1 total is 'lots MiB', expected a number"):
        parse_gpu_inventory(f"{HEADER}\n{ROWS.replace('81559 MiB', 'lots MiB', 1)}")


def test_a_csv_header_with_only_a_timestamp_is_not_enough():
    with pytest.raises(AdapterError, match=r"neither a name nor a memory\.total column"):
        parse_gpu_inventory("timestamp, driver_version\n2026/07/03 22:10:46.109, 590.48.01\n")


def test_newer_amd_smi_wraps_the_list_in_gpu_data():
    bare = parse(json.dumps(AMD_METRIC))
    wrapped = parse(json.dumps({"gpu_data": AMD_METRIC}))
    assert wrapped == bare
    assert detect(json.dumps({"gpu_data": AMD_METRIC})) == "gpu-inventory"


def test_amd_smi_static_gives_the_market_name_vram_size_and_driver():
    # Laid out as amdsmi_commands.py::static_gpu writes it (no real capture exists, see formats.md).
    static = [
        {
            "gpu": 0,
            "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "0xABC"},
            "bus": {"bdf": "0000:0c:00.0"},
            "vram": {"type": "HBM", "size": {"value": 196592, "unit": "MB"}},
            "driver": {"name": "amdgpu", "version": "6.8.5"},
        }
    ]
    result = parse_gpu_inventory(json.dumps({"gpu_data": static}))
    assert result["driver_version"] == "6.8.5"
    gpu = result["gpus"][0]
    assert (gpu["name"], gpu["memory_total_mib"], gpu["bus_id"]) == (
        "AMD Instinct MI300X",
        196592.0,
        "0000:0c:00.0",
    )
    assert gpu["memory_used_mib"] is None


def test_amd_smi_memory_in_an_unknown_unit_is_refused():
    entry = json.loads(json.dumps(AMD_METRIC))
    entry[0]["mem_usage"]["total_vram"]["unit"] = "furlongs"
    with pytest.raises(AdapterError, match="unknown memory unit 'furlongs'"):
        parse_gpu_inventory(json.dumps(entry))


def test_rocm_smi_key_spellings_of_different_versions_give_the_same_name():
    old_spelling = {k.replace("Card Series", "Card series"): v for k, v in ROCM["card0"].items()}
    renamed = parse_gpu_inventory(json.dumps({"card0": old_spelling, "system": ROCM["system"]}))
    assert renamed == parse_gpu_inventory(json.dumps(ROCM))


def test_rocm_smi_cards_are_ordered_by_number_not_by_text():
    cards = {f"card{n}": dict(ROCM["card0"]) for n in (10, 2, 1)}
    result = parse_gpu_inventory(json.dumps({**cards, "system": ROCM["system"]}))
    assert [gpu["index"] for gpu in result["gpus"]] == [1, 2, 10]


def test_xml_with_entity_declarations_is_refused_before_parsing():
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]>'
        "<nvidia_smi_log>&a;</nvidia_smi_log>"
    )
    with pytest.raises(AdapterError, match="XML with entity declarations is refused"):
        parse_gpu_inventory(bomb)


def test_xml_that_is_not_an_nvidia_smi_log_is_refused():
    with pytest.raises(AdapterError, match="not GPU inventory output"):
        parse_gpu_inventory("<html><body>502 Bad Gateway</body></html>")


def test_a_truncated_nvidia_smi_xml_is_refused_as_not_well_formed():
    with pytest.raises(AdapterError, match="not well-formed XML"):
        parse_gpu_inventory(A10G[: len(A10G) // 2])


def test_an_nvidia_smi_log_with_no_gpu_elements_lists_no_gpus():
    start, end = A10G.index("<gpu id"), A10G.index("</gpu>") + len("</gpu>")
    assert parse_gpu_inventory(A10G[:start] + A10G[end:])["gpus"] == []
