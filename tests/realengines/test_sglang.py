"""The sglang profile against SGLang 0.5's own code (the test-engines virtualenv): its serve lines
through SGLang's argument parser, and the real `sglang.bench_serving` run against simhost's
SGLang personality, its output read by the sglang-bench adapter. No SGLang server runs: it
needs a GPU (docs/hosts.md, "SGLang")."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.adapters import parse
from runners.commands import fill
from tests.simhosts import free_port
from tests.sshd import wait_for

HERE = Path(__file__).resolve().parent
SGLANG = next(d for d in builtin_profile_documents() if d["name"] == "sglang")
VALUES = {
    **SGLANG["parameters"],
    "model": "sim",
    "model_path": "/models/sim",
    "tensor_parallel_size": 1,
    "max_model_len": 4096,
    "hicache_ratio": 2.0,
}


ARMS = ("resident", "offload", "recompute")


def server_args(venv_python: Path) -> list[dict]:
    """What SGLang's parser read from each arm's serve line (one import for all three)."""
    lines = []
    for arm in ARMS:
        argv = fill(SGLANG["commands"]["serve"][arm], {**VALUES, "python": str(venv_python)})
        assert argv[1:3] == ["-m", "sglang.launch_server"]
        lines.append(argv[3:])
    result = subprocess.run(
        [str(venv_python), str(HERE / "sglang_args_check.py"), json.dumps(lines)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.strip().splitlines()[-len(ARMS) :]]


def test_the_three_arms_serve_lines_pass_sglangs_own_parser(venv_python):
    resident, offload, recompute = server_args(venv_python)
    assert resident["enable_hierarchical_cache"] is False
    assert resident["disable_radix_cache"] is False
    assert offload["enable_hierarchical_cache"] is True
    assert offload["hicache_ratio"] == 2.0
    assert offload["hicache_write_policy"] == "write_through"
    assert offload["disable_radix_cache"] is False
    assert recompute["disable_radix_cache"] is True
    assert recompute["enable_hierarchical_cache"] is False
    for read in (resident, offload, recompute):
        assert read["enable_metrics"] is True and read["page_size"] == 64
        assert read["context_length"] == 4096 and read["model_path"] == "/models/sim"
        # ServerArgs' own checks probe the accelerator: say what they did here.
        print("ServerArgs.__post_init__:", read["post_init"])


@pytest.fixture(scope="module")
def sglang_simhost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """simhost in its SGLang personality, with HiCache on, on a free port."""
    port = free_port()
    log = tmp_path_factory.mktemp("simhost") / "server.log"
    argv = [sys.executable, "-m", "simhost", "launch_server", "--model-path", "sim"]
    argv += ["--port", str(port), "--scenario", "offload-helps", "--time-scale", "0.01"]
    argv += ["--enable-hierarchical-cache", "--enable-metrics"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base + "/health"), timeout=60)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.mark.parametrize("dataset", ["random", "prefix_repetition"])
def test_the_real_bench_serving_runs_the_profiles_line_and_its_file_is_read(
    venv_python, sglang_simhost, tokenizer_dir, tmp_path, dataset
):
    values = {
        **VALUES,
        "python": str(venv_python),
        "base_url": sglang_simhost,
        "model_path": str(tokenizer_dir),
        "input_len": 300,
        "output_len": 8,
        "prefix_len": 600,
        "suffix_len": 40,
        "num_prefixes": 2,
        "prompts_per_prefix": 3,
        "num_prompts": 6,
        "max_concurrency": 2,
        "seed": 7,
        "result_dir": str(tmp_path),
        "result_filename": "result.jsonl",
    }
    argv = fill(SGLANG["commands"]["bench"][dataset], values)
    environment = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    raw = (tmp_path / "result.jsonl").read_bytes()
    (run,) = parse(raw, tool="sglang-bench", source="result.jsonl")["runs"]
    assert run["completed"] == 6 and run["failed"] == 0 and run["max_concurrency"] == 2
    assert run["ttft_ms"]["median"] > 0 and run["e2el_ms"]["p99"] >= run["e2el_ms"]["median"]
    metrics = urllib.request.urlopen(sglang_simhost + "/metrics", timeout=5).read()
    counters = parse(metrics, tool="sglang-metrics")["counters"]
    assert counters["prefix_cache_queries_tokens"] > 0
