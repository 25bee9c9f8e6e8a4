"""The built-in profiles: every template fills with valid values, and each arm's vLLM flags are
exactly what DESIGN and formats.md section 2 require."""

from __future__ import annotations

import pytest

from gates.signals import builtin_profile_documents
from runners.commands import fill, placeholders_in

VALUES = {
    "python": "/usr/bin/python3",
    "model": "qwen3-coder-480b",
    "model_path": "Qwen/Qwen3-Coder",
    "host_address": "127.0.0.1",
    "port": 8000,
    "tensor_parallel_size": 8,
    "gpu_memory_utilization": 0.9,
    "max_model_len": 40000,
    "offload_gib": 256,
    "offload_backend": "native",
    "base_url": "http://127.0.0.1:8000",
    "input_len": 512,
    "output_len": 128,
    "prefix_len": 32000,
    "suffix_len": 512,
    "num_prefixes": 64,
    "num_prompts": 64,
    "max_concurrency": 16,
    "seed": 1234,
    "result_dir": "/tmp/tollgate/r/b",
    "result_filename": "result.json",
    "run_root": "/tmp/tollgate",
    "run_dir": "/tmp/tollgate/r",
    "sim_scenario": "offload-helps",
    "time_scale": 0.06,
    "sim_host_config": "/etc/sim/h.json",
    "sim_fault_file": "/etc/sim/f.json",
}
PROFILES = {document["name"]: document for document in builtin_profile_documents()}


def templates(document: dict):
    commands = document["commands"]
    for arm, template in commands["serve"].items():
        yield f"serve.{arm}", template
    for dataset, template in commands["bench"].items():
        yield f"bench.{dataset}", template
    for probe, template in commands["probes"].items():
        yield f"probes.{probe}", template


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_template_fills_with_valid_values(name):
    for where, template in templates(PROFILES[name]):
        argv = fill(template, VALUES)
        assert all("{" not in token for token in argv), where


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_serves_all_three_arms_and_benches_every_dataset(name):
    commands = PROFILES[name]["commands"]
    assert set(commands["serve"]) == {"resident", "offload", "recompute"}
    assert {"random", "prefix_repetition", "cold_recovery"} <= set(commands["bench"])


def test_the_profile_defaults_are_valid_where_they_are_used():
    for document in PROFILES.values():
        defaults = document["parameters"]
        for _, template in templates(document):
            fill(template, {**VALUES, **defaults})
        used = {name for _, t in templates(document) for name in placeholders_in(t)}
        # run_root is not a template value but where execution puts run directories.
        assert set(defaults) - used <= {"run_root"}, document["name"]


def test_the_vllm_arms_use_exactly_the_flags_that_select_them():
    serve = {arm: fill(t, VALUES) for arm, t in PROFILES["vllm"]["commands"]["serve"].items()}
    assert "--enable-prefix-caching" in serve["resident"]
    assert not any(a.startswith("--kv-") for a in serve["resident"])
    assert "--enable-prefix-caching" in serve["offload"]
    assert serve["offload"][serve["offload"].index("--kv-offloading-size") + 1] == "256.0"
    # Recompute: caching off and no offload flag at all (any size would turn native offload on).
    assert "--no-enable-prefix-caching" in serve["recompute"]
    assert not any(a.startswith(("--kv-", "--enable-prefix")) for a in serve["recompute"])
    assert all(argv[:2] == ["vllm", "serve"] for argv in serve.values())


def test_vllm_benches_save_a_result_file_greedily_with_the_agreed_percentiles():
    for dataset, template in PROFILES["vllm"]["commands"]["bench"].items():
        argv = fill(template, VALUES)
        assert argv[:3] == ["vllm", "bench", "serve"], dataset
        assert "--save-result" in argv and argv[argv.index("--temperature") + 1] == "0"
        assert argv[argv.index("--max-concurrency") + 1] == "16"
        assert argv[argv.index("--metric-percentiles") + 1] == "50,90,99"
