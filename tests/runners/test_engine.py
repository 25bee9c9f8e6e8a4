"""What an engine exposes is read from its profile through one interface (runners/engine.py)."""

from __future__ import annotations

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.adapters import ADAPTERS
from runners.engine import engine_of
from runners.errors import SpecError

PROFILES = {document["name"]: document for document in builtin_profile_documents()}


def test_a_profile_without_an_engine_section_is_vllm():
    engine = engine_of(PROFILES["simhost"]["commands"])
    assert (engine.name, engine.health_path, engine.metrics_path) == ("vllm", "/health", "/metrics")
    assert (engine.metrics_tool, engine.bench_tool) == ("vllm-metrics", "vllm-bench")
    assert engine.version_probe == "vllm_version"


def test_the_vllm_profile_runs_lmcache_beside_the_offload_arm_only_with_its_backend():
    engine = engine_of(PROFILES["vllm"]["commands"])
    (lmcache,) = engine.services_for("offload", {"offload_backend": "lmcache"})
    assert lmcache.name == "lmcache" and lmcache.health is not None
    assert lmcache.metrics_tool == "lmcache-metrics"
    assert engine.services_for("offload", {"offload_backend": "native"}) == []
    assert engine.services_for("resident", {"offload_backend": "lmcache"}) == []


def test_the_sglang_profile_names_its_own_adapters_and_version_probe():
    engine = engine_of(PROFILES["sglang"]["commands"])
    assert (engine.metrics_tool, engine.bench_tool) == ("sglang-metrics", "sglang-bench")
    assert engine.version_probe in PROFILES["sglang"]["commands"]["probes"]
    assert set(engine.hit_proof) == {"queries", "hits", "loads"}


def test_the_vllm_aiperf_profile_is_a_vllm_engine_benched_by_aiperf():
    engine = engine_of(PROFILES["vllm-aiperf"]["commands"])
    assert (engine.name, engine.metrics_tool, engine.bench_tool) == (
        "vllm",
        "vllm-metrics",
        "aiperf",
    )
    assert engine.bench_tool in ADAPTERS


def test_side_services_are_a_list_started_in_order():
    commands = {
        "engine": {
            "side_services": [
                {"name": "metadata", "start": ["a"], "health": ["b"]},
                {"name": "master", "start": ["c"], "arms": ["offload", "resident"]},
            ]
        }
    }
    engine = engine_of(commands)
    assert [s.name for s in engine.services_for("offload", {})] == ["metadata", "master"]
    assert [s.name for s in engine.services_for("resident", {})] == ["master"]


def test_the_metered_services_of_an_arm_are_those_whose_counters_are_read():
    metered = {
        "name": "lmcache",
        "start": ["a"],
        "metrics": ["m"],
        "metrics_tool": "lmcache-metrics",
    }
    commands = {"engine": {"side_services": [{"name": "master", "start": ["c"]}, metered]}}
    engine = engine_of(commands)
    assert [s.name for s in engine.metered_for("offload", {})] == ["lmcache"]
    assert engine.metered_for("resident", {}) == []


def test_an_endpoint_the_engine_serves_is_read_but_never_launched():
    kvbm = {"name": "kvbm", "metrics": ["m"], "metrics_tool": "kvbm-metrics"}
    master = {"name": "master", "start": ["c"]}
    engine = engine_of(
        {"engine": {"side_services": [master, kvbm], "hit_proof": {"side_service": "kvbm"}}}
    )
    assert [s.name for s in engine.services_for("offload", {})] == ["master", "kvbm"]
    assert [s.name for s in engine.launched_for("offload", {})] == ["master"]
    assert [s.name for s in engine.metered_for("offload", {})] == ["kvbm"]
    assert engine.hit_proof_service == "kvbm"


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"health_path": "health"}, "engine.health_path"),
        ({"metrics_tool": ""}, "engine.metrics_tool"),
        ({"kv_cache_size": "guess"}, "engine.kv_cache_size"),
        ({"side_services": [{"name": "X", "start": ["a"]}]}, "engine.side_services[0].name"),
        ({"side_services": [{"name": "x", "start": []}]}, "engine.side_services[0].start"),
        # Without a start only the engine's own metrics endpoint: counters, no health check.
        ({"side_services": [{"name": "x"}]}, "engine.side_services[0].start"),
        (
            {"side_services": [{"name": "x", "health": ["h"], "metrics": ["m"]}]},
            "engine.side_services[0].start",
        ),
        (
            {"side_services": [{"name": "x", "start": ["a"], "arms": ["warm"]}]},
            "engine.side_services[0].arms",
        ),
        (
            {"side_services": [{"name": "x", "start": ["a"], "metrics": ["m"]}]},
            "engine.side_services[0].metrics_tool",
        ),
        ({"hit_proof": ["x"]}, "engine.hit_proof"),
        (
            # A service whose counters are never read cannot prove a hit.
            {"side_services": [{"name": "x", "start": ["a"]}], "hit_proof": {"side_service": "x"}},
            "engine.hit_proof.side_service",
        ),
    ],
)
def test_a_malformed_engine_section_is_refused_naming_the_field(section, field):
    with pytest.raises(SpecError) as raised:
        engine_of({"engine": section})
    assert raised.value.field == field


def test_a_side_service_with_read_counters_can_be_the_hit_proof():
    service = {
        "name": "lmcache",
        "start": ["a"],
        "metrics": ["m"],
        "metrics_tool": "lmcache-metrics",
    }
    engine = engine_of(
        {"engine": {"side_services": [service], "hit_proof": {"side_service": "lmcache"}}}
    )
    assert engine.hit_proof_service == "lmcache"
    assert engine_of({"engine": {"side_services": [service]}}).hit_proof_service is None
