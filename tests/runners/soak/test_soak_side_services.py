"""A soak window reads the offload arm's side services (LMCache's server, ...) as G3's bench step
does: the agent's config names them, each window's scrapes become `side_services` facts and
`hit_proof`, and a failed scrape is named in the window, flagging it only when that service's
counters are the profile's hit proof. Pure: no database; the engine's pages are real captures
(tests/fixtures/vllm-metrics), LMCache's the pages simhost's lmcache-server writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.specs import validation as specs
from runners.soak import collector
from runners.soak.retention import window_flags
from simhost.lmcache import HITS, QUERIES, lmcache_page

ROOT = Path(__file__).resolve().parents[3]
ENGINE_PAGE = (
    ROOT / "tests/fixtures/vllm-metrics/er0080__metrics_vllm_0.25.1_loaded_128conc.txt"
).read_bytes()
BENCH = (
    ROOT / "tests/fixtures/vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json"
).read_bytes()
PATHS = collector.SoakPaths("/srv/tollgate/run-7")


def simhost_commands() -> dict:
    profile = json.loads((ROOT / "gates/builtin_profiles/simhost.json").read_text())
    return profile.get("commands", profile)


def values(**more) -> dict:
    return {
        "python": "/usr/bin/python3",
        "host_address": "127.0.0.1",
        "port": 8000,
        "model": "m",
        "sim_scenario": "offload-helps-compact",
        "time_scale": 1.0,
        "sim_host_config": "/etc/h.json",
        "sim_fault_file": "/etc/f.json",
        "offload_gib": 64,
        "offload_backend": "native",
        **more,
    }


def spec() -> dict:
    return specs.default_spec("G4")


def lmcache(asked: float, hit: float) -> bytes:
    return lmcache_page({QUERIES: asked, HITS: hit}).encode()


def line(**more) -> dict:
    return {
        "seq": 4,
        "start": 100.0,
        "end": 160.0,
        "crashed": False,
        "side_services": [{"name": "lmcache", "metrics_tool": "lmcache-metrics", "errors": {}}],
        "hit_proof": "lmcache",
        **more,
    }


def files(**more) -> dict[str, bytes]:
    return {
        "bench.json": BENCH,
        "metrics-before.txt": ENGINE_PAGE,
        "metrics-after.txt": ENGINE_PAGE,
        "lmcache-metrics-before.txt": lmcache(1000, 100),
        "lmcache-metrics-after.txt": lmcache(3000, 1300),
        **more,
    }


def test_the_agent_runs_the_offload_arms_side_services_with_their_commands_filled():
    config = collector.agent_config(
        spec(),
        simhost_commands(),
        values(offload_backend="lmcache", lmcache_http_port=9123),
        PATHS,
    )
    (service,) = config["side_services"]
    assert service["name"] == "lmcache" and service["metrics_tool"] == "lmcache-metrics"
    assert service["start_argv"][:4] == ["/usr/bin/python3", "-m", "simhost", "lmcache-server"]
    assert "http://127.0.0.1:8000/metrics" in service["start_argv"]
    # hostctl.py lives in the soak's run directory, uploaded with the agent.
    assert service["metrics_argv"] == [
        "/usr/bin/python3",
        "/srv/tollgate/run-7/hostctl.py",
        "metrics",
        "http://127.0.0.1:9123",
        "/metrics",
    ]
    assert service["health_argv"][-1] == "/healthcheck"
    assert config["hit_proof"] == "lmcache"


def test_a_native_offload_soak_has_no_side_services():
    config = collector.agent_config(spec(), simhost_commands(), values(), PATHS)
    assert "side_services" not in config and "hit_proof" not in config


def test_the_hit_proofs_counters_are_the_windows_offload_hit_rate():
    window = collector.Window(line(), files=files())
    sample = collector.window_sample(window, watch_health=False)
    facts = sample["side_services"]["lmcache"]
    assert facts["lookup_hit_rate"] == pytest.approx(0.6)
    assert (facts["requested_tokens"], facts["hit_tokens"]) == (2000.0, 1200.0)
    assert sample["hit_proof"] == "lmcache" and sample["side_services_unread"] == {}
    assert sample["external_hit_rate"] == pytest.approx(0.6)
    # The engine's own rate stays beside it (this capture's counters did not move: unknown).
    assert "engine_external_hit_rate" in sample and sample["engine_external_hit_rate"] is None
    assert sample["notes"] == []
    kept = {a.name: a.tool for a in collector.window_artifacts(window)}
    assert kept["soak/w000004/lmcache-metrics-before.txt"] == "lmcache-metrics"
    assert kept["soak/w000004/lmcache-metrics-after.txt"] == "lmcache-metrics"
    assert kept["soak/w000004/metrics-after.txt"] == "vllm-metrics"


def test_an_unread_hit_proof_leaves_the_hit_rate_unknown_and_flags_the_window():
    broken = line(
        side_services=[
            {
                "name": "lmcache",
                "metrics_tool": "lmcache-metrics",
                "errors": {"after": "exit 1: connection refused"},
            }
        ]
    )
    taken = files()
    del taken["lmcache-metrics-after.txt"]
    sample = collector.window_sample(collector.Window(broken, files=taken), watch_health=False)
    assert sample["side_services"] == {}
    assert "connection refused" in sample["side_services_unread"]["lmcache"]
    assert sample["external_hit_rate"] is None and sample["hit_proof"] == "lmcache"
    (note,) = sample["notes"]
    assert "lmcache metrics not read" in note and "hit proof" in note
    # A noted window is a telling one: retention keeps its raw files.
    assert window_flags(4, sample).noted


def test_a_page_the_adapter_refuses_is_unread_with_the_adapters_reason():
    sample = collector.window_sample(
        collector.Window(line(), files=files(**{"lmcache-metrics-after.txt": ENGINE_PAGE})),
        watch_health=False,
    )
    assert "lmcache_mp_" in sample["side_services_unread"]["lmcache"]
    assert sample["external_hit_rate"] is None and sample["notes"]


def test_a_side_service_that_is_not_the_hit_proof_is_named_when_unread_and_flags_nothing():
    other = line(
        side_services=[
            {"name": "lmcache", "metrics_tool": "lmcache-metrics", "errors": {"before": "exit 7"}}
        ],
        hit_proof=None,
    )
    taken = files()
    del taken["lmcache-metrics-before.txt"]
    sample = collector.window_sample(collector.Window(other, files=taken), watch_health=False)
    assert sample["side_services_unread"] == {"lmcache": "before the bench: exit 7"}
    assert sample["hit_proof"] == "engine" and sample["notes"] == []
    assert "engine_external_hit_rate" not in sample
    plain = collector.window_sample(collector.Window(line(), files=files()), watch_health=False)
    assert sample["external_hit_rate"] == plain["engine_external_hit_rate"]


def test_a_crashed_window_names_the_missing_scrape_without_a_second_note():
    crashed = line(crashed=True)
    taken = {"lmcache-metrics-before.txt": lmcache(10, 5)}
    sample = collector.window_sample(collector.Window(crashed, files=taken), watch_health=False)
    assert sample["side_services_unread"]["lmcache"] == "after the bench: the window crashed"
    assert not any("lmcache" in note for note in sample["notes"])


def test_a_window_without_side_services_derives_as_before():
    plain = {"seq": 4, "start": 100.0, "end": 160.0, "crashed": False}
    sample = collector.window_sample(
        collector.Window(plain, files={"metrics-before.txt": ENGINE_PAGE}), watch_health=False
    )
    assert not {"side_services", "side_services_unread", "hit_proof"} & set(sample)
