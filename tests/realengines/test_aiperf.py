"""The vllm-aiperf profile's bench lines run by the real `aiperf profile` (AIPerf 0.13, the
test-engines AIPerf virtualenv) against simhost's vLLM personality, and the files it writes read
by the aiperf adapters through bench_proof, as a G3 cell is."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.adapters import parse
from runners.commands import fill
from runners.engine import engine_of
from runners.results import Cell, bench_proof

PROFILE = next(d for d in builtin_profile_documents() if d["name"] == "vllm-aiperf")
AIPERF_BIN = Path(os.environ.get("TOLLGATE_ENGINES_VENV") or "", "aiperf", "bin")


@pytest.fixture(scope="module")
def vllm_simhost(start_simhost) -> str:
    # A wall-clock time scale of 1: AIPerf measures the wall, so the timings are simhost's own.
    return start_simhost("serve", "sim", "--time-scale", "1.0", "--load-time-s", "0")


def run_aiperf(dataset: str, values: dict, workdir: Path) -> subprocess.CompletedProcess[str]:
    argv = fill(PROFILE["commands"]["bench"][dataset], values)
    assert argv[0] == "aiperf"
    # AIPerf's local-tokenizer path fails under HF_HUB_OFFLINE=1 in 0.13.0 (it looks the folder
    # up as a hub id); this machine has no internet, so nothing is downloaded either way.
    environment = {"PATH": f"{AIPERF_BIN}:/usr/bin:/bin", "HOME": str(workdir)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=environment)


@pytest.mark.parametrize("dataset", ["random", "prefix_repetition"])
def test_aiperf_runs_the_profiles_bench_line_and_bench_proof_reads_its_summary(
    vllm_simhost, tokenizer_dir, tmp_path, dataset
):
    values = {
        **PROFILE["parameters"],
        "model": "sim",
        "model_path": str(tokenizer_dir),
        "base_url": vllm_simhost,
        "input_len": 200,
        "output_len": 8,
        "prefix_len": 400,
        "suffix_len": 40,
        "num_prefixes": 2,
        "num_prompts": 8,
        "max_concurrency": 2,
        "seed": 7,
        "result_dir": str(tmp_path),
        "result_filename": "result.json",
    }
    before = parse(urllib.request.urlopen(vllm_simhost + "/metrics", timeout=5).read())
    result = run_aiperf(dataset, values, tmp_path)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    tool = engine_of(PROFILE["commands"]).bench_tool
    after = parse(urllib.request.urlopen(vllm_simhost + "/metrics", timeout=5).read())
    raw = (tmp_path / "result.json").read_bytes()
    cell = Cell("resident", 2, 0)
    proof = bench_proof(raw, cell=cell, source="result.json", before=before, after=after, tool=tool)
    assert proof.measurement is not None
    run = proof.measurement["metrics"]
    assert (run["completed"], run["failed"], run["max_concurrency"]) == (8, 0, 2)
    prompt = 200 if dataset == "random" else 400 + 40
    assert run["total_input_tokens"] == 8 * prompt and run["total_output_tokens"] == 8 * 8
    assert run["ttft_ms"]["median"] > 0 and run["e2el_ms"]["p99"] >= run["e2el_ms"]["median"]
    records = parse((tmp_path / "result.jsonl").read_bytes())["per_request"]
    assert (records["count"], records["errors"]) == (8, 0)
    if dataset == "prefix_repetition":
        # Two prefixes shared by eight prompts: simhost's prefix cache saw them come back.
        assert proof.measurement["server"]["prefix_cache_hit_rate"] > 0
