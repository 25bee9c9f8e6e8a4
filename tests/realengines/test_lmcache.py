"""The LMCache profiles' side service on the real `lmcache server` (lmcache 0.5.6 on CPU torch,
the virtualenv bin/lmcache-venv builds at <engines venv>/lmcache): started from each profile's
own start line, health-checked and scraped with the profile's own hostctl commands, its page read
by the adapter before and after real lookups from LMCache's own client bench."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.adapters import detect, parse
from runners.adapters.lmcache_metrics import lookup_facts
from runners.commands import fill
from runners.engine import SideService, engine_of
from tests.realengines.conftest import VENV
from tests.simhosts import free_port
from tests.sshd import wait_for

HOSTCTL = Path(__file__).resolve().parents[2] / "runners" / "remote" / "hostctl.py"
PROFILES = {document["name"]: document for document in builtin_profile_documents()}
LMCACHE_BIN = Path(VENV or "", "lmcache", "bin")
QUIET = {**os.environ, "LMCACHE_DISABLE_BANNER": "1"}
# A small KV layout for LMCache's client bench on the CPU: 2 layers, 2 heads of 64, 16-token
# blocks; each 512-token request is two of the server's 256-token chunks.
BENCH_KV = ["--kvcache-shape-spec", "(2,64,16,2,64):float16:2", "--num-blocks", "64"]

pytestmark = pytest.mark.skipif(
    not (LMCACHE_BIN / "lmcache").exists(),
    reason="needs <TOLLGATE_ENGINES_VENV>/lmcache (bin/lmcache-venv; make test-engines)",
)


def lmcache_service(name: str) -> SideService:
    """The profile's LMCache server: its own side service, or vLLM's offload_backend lmcache."""
    engine = engine_of(PROFILES[name]["commands"])
    (service,) = engine.services_for("offload", {"offload_backend": "lmcache"})
    return service


def on_free_ports(argv: list[str], zmq_port: int) -> list[str]:
    """The start line with its ZMQ port free here (the vllm profile fixes it at vLLM's 5555)."""
    line = list(argv)
    line[line.index("--port") + 1] = str(zmq_port)
    return line


@pytest.fixture(params=["lmcache", "vllm", "vllm-aiperf"])
def started(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The real server started from the profile's start line; its health and metrics lines."""
    service = lmcache_service(request.param)
    values = {
        "python": sys.executable,
        "run_dir": str(HOSTCTL.parent),
        "offload_gib": 1,
        "lmcache_mp_port": free_port(),
        "lmcache_http_port": free_port(),
    }
    start = on_free_ports(fill(service.start, values), values["lmcache_mp_port"])
    assert start[:2] == ["lmcache", "server"]
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        # argparse refuses a flag it does not define: a clean start proves the line's flags.
        process = subprocess.Popen(
            [str(LMCACHE_BIN / "lmcache"), *start[1:]],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=QUIET,
            start_new_session=True,
        )
    health = fill(service.health or [], values)
    try:
        up = wait_for(lambda: subprocess.run(health, capture_output=True).returncode == 0, 120)
        assert up, log.read_text()[-3000:]
        yield {"service": service, "values": values, "health": health, "log": log}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def scrape(found: dict[str, Any]) -> dict[str, Any]:
    line = fill(found["service"].metrics or [], found["values"])
    page = subprocess.run(line, capture_output=True, check=True).stdout
    assert detect(page) == found["service"].metrics_tool == "lmcache-metrics"
    return parse(page, tool="lmcache-metrics")


def test_the_profiles_health_route_is_the_real_servers_and_the_quickstarts_is_not(started):
    assert started["health"][-1] == "/healthcheck"
    quickstart = [*started["health"][:-1], "/api/healthcheck"]
    assert subprocess.run(quickstart, capture_output=True).returncode != 0


def test_real_lookups_move_the_counters_the_profile_scrapes(started):
    before = scrape(started)
    # A fresh server exports no lookup counter yet: they count from 0 (the adapter).
    assert before["counters"]["lookup_requested_tokens"] is None
    runs: list[dict[str, Any]] = []

    def hit() -> bool:
        run_client_bench(started["values"])
        runs.append(lookup_facts(before, scrape(started)))
        return bool(runs[-1]["hit_tokens"])

    # The server stores asynchronously: a warm lookup right after its store may miss, so the
    # same two sequences go again (their cold lookups then find the first run's stores).
    wait_for(hit, timeout=180, interval=0)
    facts = runs[-1]
    # Each run looks two sequences up cold and warm: four lookups of 512 chunk-aligned tokens.
    assert facts["requested_tokens"] == 2048.0 * len(runs)
    assert 0 < facts["hit_tokens"] <= facts["requested_tokens"]
    assert facts["hit_l1_tokens"] == facts["hit_tokens"] and facts["hit_l2_tokens"] == 0
    assert facts["lookup_hit_rate"] == facts["hit_tokens"] / facts["requested_tokens"]


def run_client_bench(values: dict[str, Any]) -> None:
    """LMCache's own MP client (`lmcache bench server`) on the CPU: each sequence looked up,
    stored, looked up again and retrieved."""
    bench = [
        str(LMCACHE_BIN / "lmcache"),
        "bench",
        "server",
        "--rpc-url",
        f"tcp://127.0.0.1:{values['lmcache_mp_port']}",
        "--url",
        f"http://127.0.0.1:{values['lmcache_http_port']}",
        "--mode",
        "cpu",
        # 0.5.6's server registers only the lmcache_driven handlers (shared memory on a CPU).
        "--transfer-mode",
        "lmcache_driven",
        "--num-tokens",
        "512",
        *BENCH_KV,
        "--start",
        "0",
        "--end",
        "2",
        "--interval",
        "0",
        "--quiet",
    ]
    done = subprocess.run(bench, capture_output=True, text=True, env=QUIET, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
