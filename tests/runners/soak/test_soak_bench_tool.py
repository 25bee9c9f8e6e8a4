"""A soak window's bench result is read by the profile's bench client's adapter: the agent's
config names it (`bench_tool`, from the profile's engine section), every window line carries it,
and the collector reads `bench.json` with it; a line naming none is vllm-bench's (a window stored
before the agent named its tool). Pure: no database; the results are real captures
(tests/fixtures/aiperf, tests/fixtures/vllm-bench)."""

from __future__ import annotations

import json
from pathlib import Path

from gates.specs import validation as specs
from runners.soak import collector

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
AIPERF = (FIXTURES / "aiperf/aiperf-0.13.0_profile_completions_c2_vs_simhost.json").read_bytes()
VLLM_BENCH = (FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json").read_bytes()
PATHS = collector.SoakPaths("/srv/tollgate/run-7")
HOST = {"model": "m", "model_path": "/models/m", "max_model_len": 4096}


def profile(name: str) -> dict:
    return json.loads((ROOT / f"gates/builtin_profiles/{name}.json").read_text())


def line(**more) -> dict:
    return {"seq": 3, "start": 100.0, "end": 160.0, "crashed": False, "bench_exit": 0, **more}


def test_the_agents_config_names_the_profiles_bench_client_and_its_aiperf_line():
    document = profile("vllm-aiperf")
    values = {**document["parameters"], **HOST}
    config = collector.agent_config(specs.default_spec("G4"), document["commands"], values, PATHS)
    assert config["bench_tool"] == "aiperf"
    argv = config["bench_argv"]
    assert argv[:2] == ["aiperf", "profile"]
    # AIPerf writes its summary where the agent picks the window's bench.json up.
    assert argv[argv.index("--artifact-dir") + 1] == PATHS.data_dir
    assert argv[argv.index("--profile-export-prefix") + 1] == "bench-current.json"
    assert config["bench_result"] == f"{PATHS.data_dir}/bench-current.json"
    plain = profile("vllm")
    values = {**plain["parameters"], **HOST}
    config = collector.agent_config(specs.default_spec("G4"), plain["commands"], values, PATHS)
    assert config["bench_tool"] == "vllm-bench"


def test_an_aiperf_window_is_read_from_aiperfs_summary():
    window = collector.Window(line(bench_tool="aiperf"), files={"bench.json": AIPERF})
    sample = collector.window_sample(window, watch_health=False)
    assert (sample["completed"], sample["failed"]) == (16, 0)
    assert sample["output_throughput"] > 0
    assert 0 < sample["ttft_p50_ms"] <= sample["ttft_p99_ms"]
    assert not [note for note in sample["notes"] if "bench" in note]
    kept = {a.name: a.tool for a in collector.window_artifacts(window)}
    assert kept["soak/w000003/bench.json"] == "aiperf"


def test_a_line_naming_no_tool_is_read_as_vllm_bench_as_before():
    window = collector.Window(line(), files={"bench.json": VLLM_BENCH})
    sample = collector.window_sample(window, watch_health=False)
    assert sample["completed"] and sample["ttft_p99_ms"]
    kept = {a.name: a.tool for a in collector.window_artifacts(window)}
    assert kept["soak/w000003/bench.json"] == "vllm-bench"


def test_an_aiperf_summary_read_as_vllm_bench_is_a_note_not_a_number():
    window = collector.Window(line(bench_tool="vllm-bench"), files={"bench.json": AIPERF})
    sample = collector.window_sample(window, watch_health=False)
    assert sample["completed"] is None
    assert any(note.startswith("bench result unreadable") for note in sample["notes"])


def test_a_tool_that_is_no_bench_clients_is_named_in_the_notes():
    for tool in ("gpu-inventory", "x" * 500, ["aiperf"]):
        window = collector.Window(line(bench_tool=tool), files={"bench.json": AIPERF})
        sample = collector.window_sample(window, watch_health=False)
        assert sample["completed"] is None
        (note,) = [note for note in sample["notes"] if "bench tool" in note]
        assert note.startswith("bench result unread: unknown bench tool") and len(note) < 120
        kept = {a.name: a.tool for a in collector.window_artifacts(window)}
        assert kept["soak/w000003/bench.json"] == "bench-unknown"
