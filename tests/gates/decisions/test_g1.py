"""G1 arrival acceptance: expected inventory against observed facts; version comparison."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from gates.decisions import EvidenceError, decide_g1
from gates.decisions.g1 import version_at_least, version_key
from gates.specs.schema import VERSION_TEXT
from tests.gates.decisions.test_g3 import valid

GIB = 2**30


def g1_spec(**expect) -> dict:
    base = {
        "gpu_vendor": "amd",
        "gpu_model_pattern": "MI300X|MI325X",
        "gpu_count": 8,
        "gpu_memory_min_gib": 180,
        "driver_min": None,
        "cuda_min": None,
        "rocm_min": "6.0",
        "vllm_min": "0.20.1",
        "host_memory_min_gib": 1024,
        "offload_tier": {"required": True, "min_capacity_gib": 512},
        "free_disk_min_gib": 500,
        "kernel_pattern": r"^6\.",
    }
    base.update(expect)
    return valid(
        "G1", {"gate": "G1", "version": 1, "expect": base, "stop_loss": {"max_attempts": 2}}
    )


def facts(**changes) -> dict:
    observed = {
        "gpu_inventory": {
            "tool": "gpu-inventory",
            "source": "rocm-smi-json",
            "driver_version": "6.3.6",
            "cuda_version": None,
            "rocm_version": "6.2.1",
            "gpus": [
                {"index": i, "name": "AMD Instinct MI300X", "memory_total_mib": 196592.0}
                for i in range(8)
            ],
        },
        "vllm_version": "0.20.1+rocm621",
        "host_memory_bytes": 2048 * GIB,
        "free_disk_bytes": 3000 * GIB,
        "kernel": "6.8.0-49-generic",
        "offload_tier": {"present": True, "capacity_gib": 1024.0},
    }
    observed.update(changes)
    return observed


def rows_by_check(result: dict) -> dict:
    return {row["check"]: row for row in result["clauses"]}


def test_a_host_that_matches_every_expectation_passes():
    result = decide_g1(g1_spec(), facts())
    assert result["verdict"] == "pass"
    assert all(row["ok"] for row in result["clauses"])
    assert len(result["clauses"]) == 10  # cuda_min and driver_min are null: not checked
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize(
    ("changes", "check"),
    [
        ({"vllm_version": "0.9.2"}, "vllm_min"),
        ({"host_memory_bytes": 512 * GIB}, "host_memory_min_gib"),
        ({"free_disk_bytes": 100 * GIB}, "free_disk_min_gib"),
        ({"kernel": "5.15.0-1"}, "kernel"),
        ({"offload_tier": {"present": False, "capacity_gib": None}}, "offload_tier"),
        ({"offload_tier": {"present": True, "capacity_gib": 256.0}}, "offload_tier"),
    ],
)
def test_an_unmet_expectation_fails_naming_the_check(changes, check):
    result = decide_g1(g1_spec(), facts(**changes))
    assert result["verdict"] == "fail"
    assert [row["check"] for row in result["clauses"] if row["ok"] is False] == [check]
    assert result["reasons"][0].startswith(f"{check}: ")


def test_gpu_count_model_memory_and_rocm_are_checked_against_the_inventory():
    inventory = copy.deepcopy(facts()["gpu_inventory"])
    inventory["gpus"] = inventory["gpus"][:7]
    inventory["gpus"][0].update(name="AMD Instinct MI250X", memory_total_mib=65536.0)
    inventory["rocm_version"] = "5.7.1"
    rows = rows_by_check(decide_g1(g1_spec(), facts(gpu_inventory=inventory)))
    assert rows["gpu_count"]["observed"] == 7 and rows["gpu_count"]["ok"] is False
    assert rows["gpu_model"]["ok"] is False and "MI250X" in rows["gpu_model"]["cause"]
    assert rows["gpu_memory_min_gib"]["observed"] == 64.0
    assert rows["rocm_min"]["ok"] is False


def test_the_vendor_comes_from_the_inventory_source():
    nvidia = facts()["gpu_inventory"] | {"source": "nvidia-smi-xml"}
    rows = rows_by_check(decide_g1(g1_spec(), facts(gpu_inventory=nvidia)))
    assert rows["gpu_vendor"]["observed"] == "nvidia" and rows["gpu_vendor"]["ok"] is False


def test_a_gpu_sold_as_80_gb_may_hold_less_than_80_gib():
    inventory = facts()["gpu_inventory"] | {
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559.0}],
        "source": "nvidia-smi-xml",
    }
    spec = g1_spec(
        gpu_vendor="nvidia",
        gpu_model_pattern="H100",
        gpu_count=1,
        gpu_memory_min_gib=80,
        rocm_min=None,
    )
    rows = rows_by_check(decide_g1(spec, facts(gpu_inventory=inventory)))
    assert rows["gpu_memory_min_gib"]["ok"] is False
    assert rows["gpu_memory_min_gib"]["cause"] == "smallest GPU has 79.65 GiB"


def test_an_unobserved_fact_is_inconclusive_with_the_reason():
    result = decide_g1(g1_spec(), facts(vllm_version=None, offload_tier=None))
    assert result["verdict"] == "inconclusive"
    assert result["reasons"] == [
        "vllm_min: no readable version observed (None)",
        "offload_tier: the offload tier was not observed",
    ]


def test_a_failed_expectation_outweighs_an_unobserved_one():
    result = decide_g1(g1_spec(), facts(vllm_version=None, kernel="4.19"))
    assert result["verdict"] == "fail"
    assert result["reasons"] == ["kernel: does not match"]


def test_a_missing_inventory_leaves_every_gpu_check_inconclusive():
    rows = rows_by_check(decide_g1(g1_spec(), facts(gpu_inventory=None)))
    for check in ("gpu_vendor", "gpu_model", "gpu_count", "gpu_memory_min_gib", "rocm_min"):
        assert rows[check]["ok"] is None, check


def test_an_offload_tier_that_is_not_required_may_be_absent():
    spec = g1_spec(offload_tier={"required": False, "min_capacity_gib": None})
    rows = rows_by_check(decide_g1(spec, facts(offload_tier={"present": False})))
    assert "offload_tier" not in rows


@pytest.mark.parametrize(
    ("observed", "minimum", "expected"),
    [
        ("0.9.2", "0.20.1", False),
        ("0.20.1", "0.9.2", True),
        ("0.20.1+cu124", "0.20.1", True),
        ("0.6.3.post1", "0.6.3", True),
        ("0.11.0rc1", "0.11.0", False),
        ("0.10.1.dev0+g1234abc", "0.10.1", False),
        ("0.10.2.dev0", "0.10.1", True),
        ("535.54.03", "535.54", True),
        ("535.54.03", "535.104", False),
        ("12.2", "12.2.0", True),
        ("6.0.32830-d62f6a171", "6.0", True),
        ("6.0.0-amd64", "6.0", True),
        ("v0.20.1", "0.20.1", True),
        ("unknown", "0.1", None),
        (None, "0.1", None),
    ],
)
def test_versions_compare_numerically_with_suffixes(observed, minimum, expected):
    assert version_at_least(observed, minimum) is expected


@pytest.mark.parametrize(
    ("observed", "minimum", "expected"),
    [
        # PEP 440 as they stand: a local label, leading zeros, a "-N" post-release.
        ("0.20.1+rocm721", "0.20.1", True),
        ("0.20.1+rocm721", "0.20.2", False),
        ("535.104.05", "535.104.5", True),
        ("535.104.05", "535.54", True),
        ("535.104.05", "535.104.6", False),
        ("6.2.0-66", "6.2.0", True),
        ("6.2.0-66", "6.2.0.post67", False),
        ("6.2.0-66", "6.2.1", False),
        # Not PEP 440: read as the leading release.
        ("6.2.41133-dd7f95766", "6.2", True),
        ("6.2.41133-dd7f95766", "6.3", False),
        ("6.0.0-amd64", "6.0.1", False),
        ("1.0-1ubuntu1", "1.0", True),
    ],
)
def test_vendor_version_strings_compare_by_their_release(observed, minimum, expected):
    assert version_at_least(observed, minimum) is expected


@pytest.mark.parametrize(
    ("text", "read_as"),
    [
        ("0.20.1+rocm721", "0.20.1"),
        ("535.104.05", "535.104.5"),
        ("6.2.0-66", "6.2.0.post66"),
        ("6.2.41133-dd7f95766", "6.2.41133"),
        ("6.0.0-amd64", "6.0.0"),
        ("1" * 5000, None),
    ],
)
def test_pep_440_is_read_by_packaging_and_anything_else_by_its_leading_release(text, read_as):
    assert version_key(text) == (None if read_as is None else Version(read_as))


@settings(max_examples=300, deadline=None)
@given(st.from_regex(VERSION_TEXT["pattern"], fullmatch=True))
def test_every_minimum_the_spec_allows_is_a_readable_version(text):
    assert isinstance(version_key(text), Version)


releases = st.lists(st.integers(0, 999), min_size=1, max_size=4)


def dotted(parts: list[int]) -> str:
    return ".".join(map(str, parts))


@settings(max_examples=300, deadline=None)
@given(releases, releases)
def test_version_order_is_the_numeric_order_of_the_release_parts(left, right):
    def trimmed(parts):
        parts = list(parts)
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return tuple(parts)

    assert (version_key(dotted(left)) < version_key(dotted(right))) == (
        trimmed(left) < trimmed(right)
    )


@settings(max_examples=200, deadline=None)
@given(releases, st.integers(0, 99), st.text("abcdefxyz0123456789", max_size=8))
def test_stages_order_around_the_release_and_local_labels_do_not_count(parts, number, local):
    release = dotted(parts)
    assert version_key(f"{release}.dev{number}") < version_key(f"{release}rc{number}")
    assert version_key(f"{release}rc{number}") < version_key(release)
    assert version_key(release) < version_key(f"{release}.post{number}")
    assert version_key(f"{release}+{local}") == version_key(release)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list(facts())), json_values))
def test_any_facts_give_a_verdict_or_an_evidence_error(damage):
    try:
        result = decide_g1(g1_spec(), facts(**damage))
    except EvidenceError as error:
        assert error.field.startswith("facts")
        return
    assert result["verdict"] in ("pass", "fail", "inconclusive")
    assert result["reasons"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_version_text_reads_or_is_refused_without_a_crash(text):
    key = version_key(text)
    assert key is None or isinstance(key, Version)


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def real_inventory(path: str) -> dict:
    """A real nvidia-smi / rocm-smi capture, normalized (the adapters' expected output)."""
    return json.loads((FIXTURES / path).read_text())


def test_a_real_a100_inventory_meets_a_matching_expectation():
    spec = g1_spec(
        gpu_vendor="nvidia",
        gpu_model_pattern="A100",
        gpu_count=1,
        gpu_memory_min_gib=80,
        driver_min="535.54",
        cuda_min="12.2",
        rocm_min=None,
    )
    inventory = real_inventory("nvidia-smi/telegraf__a100-sxm4-v12.expected.json")
    result = decide_g1(spec, facts(gpu_inventory=inventory))
    assert result["verdict"] == "pass", result["reasons"]


def test_a_real_mi100_inventory_without_a_rocm_version_is_inconclusive_for_rocm_min():
    inventory = real_inventory("rocm-smi/telegraf__mi100_rocm602.expected.json")
    spec = g1_spec(
        gpu_model_pattern="MI100", gpu_count=len(inventory["gpus"]), gpu_memory_min_gib=31
    )
    rows = rows_by_check(decide_g1(spec, facts(gpu_inventory=inventory)))
    assert rows["gpu_model"]["ok"] and rows["gpu_memory_min_gib"]["ok"]
    assert rows["rocm_min"]["ok"] is None
