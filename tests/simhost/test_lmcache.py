"""`simhost lmcache-server`: LMCache's HTTP frontend emulated, its lookup counters read off the
emulated engine's external prefix cache counters and readable by Tollgate's own adapter, its
routes and page shaped as lmcache 0.5.6's (tests/fixtures/lmcache-metrics/, the real captures)."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from runners.adapters import parse
from runners.adapters.lmcache_metrics import lookup_facts
from simhost.lmcache import engine_counters
from tests.runners.adapters.golden import FIXTURES
from tests.sshd import free_port, wait_for

REAL_AFTER = (FIXTURES / "lmcache-metrics" / "lmcache-0.5.6__server_after.txt").read_text()

ENGINE_PAGE = """# TYPE vllm:external_prefix_cache_queries counter
vllm:external_prefix_cache_queries_total{{engine="0",model_name="m"}} {asked}
vllm:external_prefix_cache_queries_created{{engine="0",model_name="m"}} 1.7e9
vllm:external_prefix_cache_hits_total{{engine="0",model_name="m"}} {hit}
"""


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def help_lines(page: str) -> set[str]:
    return {line for line in page.splitlines() if line.startswith("# HELP lmcache_mp_")}


@pytest.fixture
def lmcache_server(tmp_path: Path):
    """The LMCache double beside a stub engine serving a written /metrics page."""
    engine_port, port, prometheus_port = free_port(), free_port(), free_port()
    (tmp_path / "metrics").write_text(ENGINE_PAGE.format(asked=0, hit=0))
    command = [sys.executable, "-m", "http.server", str(engine_port), "--bind", "127.0.0.1"]
    engine = subprocess.Popen([*command, "--directory", str(tmp_path)], stderr=subprocess.DEVNULL)
    engine_url = f"http://127.0.0.1:{engine_port}/metrics"
    simhost = [sys.executable, "-m", "simhost", "lmcache-server", "--http-port", str(port)]
    # --prometheus-port as lmcache server takes it: accepted, and no port opened.
    simhost += ["--prometheus-port", str(prometheus_port)]
    server = subprocess.Popen([*simhost, "--engine-metrics-url", engine_url])
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(base + "/healthcheck")[0] == 200, timeout=20)
        wait_for(lambda: get(f"http://127.0.0.1:{engine_port}/metrics")[0] == 200, timeout=20)
        yield base, tmp_path / "metrics", engine, prometheus_port
    finally:
        for process in (server, engine):
            process.terminate()
            process.wait(timeout=10)


def test_its_lookup_counters_are_the_engines_external_prefix_cache_counters(lmcache_server):
    base, page, _, _ = lmcache_server
    before = parse(get(base + "/metrics")[1], tool="lmcache-metrics")
    page.write_text(ENGINE_PAGE.format(asked=2000, hit=1200))
    after = parse(get(base + "/metrics")[1], tool="lmcache-metrics")
    assert lookup_facts(before, after) == {
        "metrics_tool": "lmcache-metrics",
        "lookup_hit_rate": 0.6,
        "requested_tokens": 2000.0,
        "hit_tokens": 1200.0,
        "hit_l1_tokens": 1200.0,
        "hit_l2_tokens": 0.0,
    }


def test_before_any_lookup_its_page_has_no_lookup_series_as_the_real_servers(lmcache_server):
    base, _, _, _ = lmcache_server
    counters = parse(get(base + "/metrics")[1], tool="lmcache-metrics")["counters"]
    assert counters == dict.fromkeys(counters)


def test_an_engine_not_answering_has_looked_nothing_up(lmcache_server):
    base, page, engine, _ = lmcache_server
    page.write_text(ENGINE_PAGE.format(asked=2000, hit=1200))
    assert "lmcache_mp_lookup_hit_tokens_total 1200.0" in get(base + "/metrics")[1]
    engine.terminate()
    engine.wait(timeout=10)
    counters = parse(get(base + "/metrics")[1], tool="lmcache-metrics")["counters"]
    assert counters["lookup_requested_tokens"] is None and counters["lookup_hit_tokens"] is None


def test_its_help_texts_are_the_real_servers(lmcache_server):
    base, page, _, _ = lmcache_server
    page.write_text(ENGINE_PAGE.format(asked=10, hit=5))
    printed = help_lines(get(base + "/metrics")[1])
    assert len(printed) == 6 and printed <= help_lines(REAL_AFTER)


def test_it_routes_only_what_the_real_server_routes_for_tollgate(lmcache_server):
    base, _, _, prometheus_port = lmcache_server
    assert get(base + "/healthcheck") == (200, '{"status":"healthy"}')
    # Paths lmcache 0.5.6 does not route (the quickstart's among them) are FastAPI's 404; the
    # double leaves out the real routes Tollgate never reads (/, /status, /version...) too.
    for path in ("/api/healthcheck", "/health", "/api/metrics"):
        assert get(base + path) == (404, '{"detail":"Not Found"}'), path
    assert get(f"http://127.0.0.1:{prometheus_port}/metrics") == (0, "")


def test_only_the_external_counters_totals_are_counted():
    counters = engine_counters(
        ENGINE_PAGE.format(asked=30, hit=12) + ENGINE_PAGE.format(asked=5, hit=1)
    )
    assert counters == {
        "vllm:external_prefix_cache_queries_total": 35.0,
        "vllm:external_prefix_cache_hits_total": 13.0,
    }


def test_behind_lmcaches_mp_connector_the_tier_runs_and_vllms_cache_config_reports_none():
    # vLLM's cache_config_info has no connector setting: kv_offloading_size is None there.
    import argparse

    from simhost.engine.batching import Engine
    from simhost.engine.cacheconfig import cache_config_labels
    from simhost.host.config import HOST_PRESETS, host_config_from_dict
    from simhost.server.args import add_serve_arguments, engine_config

    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    transfer = '{"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both"}'
    values = vars(parser.parse_args(["--kv-transfer-config", transfer]))
    host = host_config_from_dict(HOST_PRESETS["h100x8-cpu512"], "preset")
    config = engine_config(values, host)
    assert config.offload_enabled and config.kv_connector == "LMCacheMPConnector"
    assert config.kv_offloading_gib == host.offload_tier.capacity_gib
    labels = cache_config_labels(Engine(config), 0.9)
    assert labels["kv_offloading_size"] == "None" and labels["num_cpu_blocks"] == "None"
