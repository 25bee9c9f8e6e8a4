"""The Mooncake profiles' side service on the real `mooncake_master` (the CPU wheel's binary,
pinned in pyproject.toml's test-engines extra): started from the profiles' own start line,
health-checked and scraped with their own hostctl commands, its page read by the adapter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.adapters import detect, parse
from runners.commands import fill
from runners.engine import engine_of
from tests.realengines.conftest import VENV
from tests.simhosts import free_port
from tests.sshd import wait_for

HOSTCTL = Path(__file__).resolve().parents[2] / "runners" / "remote" / "hostctl.py"
PROFILES = {document["name"]: document for document in builtin_profile_documents()}


@pytest.mark.parametrize("name", ["sglang-mooncake", "vllm-mooncake"])
def test_the_real_master_starts_from_the_profiles_line_answers_its_health_and_counters(
    name, tmp_path
):
    master = Path(VENV or "", "bin", "mooncake_master")
    (service,) = engine_of(PROFILES[name]["commands"]).services_for("offload", {})
    values = {
        "python": sys.executable,
        "run_dir": str(HOSTCTL.parent),
        "mooncake_rpc_port": free_port(),
        "mooncake_metrics_port": free_port(),
        "mooncake_metadata_port": free_port(),
    }
    start = fill(service.start, values)
    assert start[0] == "mooncake_master"
    log = (tmp_path / "master.log").open("wb")
    # gflags refuses a flag it does not define: a clean start proves the line's flags.
    process = subprocess.Popen(
        [str(master), *start[1:]], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        health = fill(service.health or [], values)
        assert wait_for(lambda: subprocess.run(health).returncode == 0, timeout=30), (
            tmp_path / "master.log"
        ).read_text()[-2000:]
        # The co-located HTTP metadata server the engine registers with serves by then too.
        metadata = [*health[:3], f"http://127.0.0.1:{values['mooncake_metadata_port']}", "/health"]
        assert subprocess.run(metadata).returncode == 0
        page = subprocess.run(fill(service.metrics or [], values), capture_output=True, check=True)
        assert detect(page.stdout) == service.metrics_tool == "mooncake-metrics"
        read = parse(page.stdout, tool="mooncake-metrics")
        assert read["gauges"]["key_count"] == 0 and read["counters"]["put_start_items"] == 0
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_the_sglang_mooncake_offload_line_passes_sglangs_own_parser(venv_python):
    """SGLang 0.5.23's ServerArgs reads the HiCache storage backend and the extra config its
    Mooncake backend takes first (master_server_address, metadata_server, protocol)."""
    values = {
        **PROFILES["sglang-mooncake"]["parameters"],
        "python": str(venv_python),
        "model": "sim",
        "model_path": "/models/sim",
        "tensor_parallel_size": 1,
        "max_model_len": 4096,
    }
    argv = fill(PROFILES["sglang-mooncake"]["commands"]["serve"]["offload"], values)
    check = Path(__file__).resolve().parent / "sglang_args_check.py"
    result = subprocess.run(
        [str(venv_python), str(check), json.dumps([argv[3:]])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    read = json.loads(result.stdout.strip().splitlines()[-1])
    assert read["enable_hierarchical_cache"] is True
    assert read["hicache_storage_backend"] == "mooncake"
    extra = json.loads(read["hicache_storage_backend_extra_config"])
    assert extra["master_server_address"] == "127.0.0.1:50051"
    assert extra["metadata_server"] == "http://127.0.0.1:8080/metadata"
    assert extra["protocol"] == "tcp"
