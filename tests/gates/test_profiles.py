"""The built-in profiles: every template fills with valid values, and each arm's vLLM flags are
exactly what DESIGN and formats.md section 2 require."""

from __future__ import annotations

import pytest

from gates.services.profiles import builtin_profile_documents
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
    "lmcache_http_port": 8080,
    "flush_prompts": 40,
    "flush_seed": 99,
    "replay_file": "/tmp/tollgate/r/replay-c16.jsonl",
    "records_file": "/tmp/tollgate/r/b/records.jsonl",
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
    for dataset, phases in commands.get("phases", {}).items():
        for phase, template in phases.items():
            yield f"phases.{dataset}.{phase}", template
    for backend, server in commands.get("offload_servers", {}).items():
        for part, template in server.items():
            yield f"offload_servers.{backend}.{part}", template


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


def test_vllm_benches_load_the_tokenizer_from_the_model_path_not_the_served_name():
    # Without --tokenizer, vllm bench looks the served name up on the hub (and fails offline).
    commands = PROFILES["vllm"]["commands"]
    benches = [*commands["bench"].values(), *commands["phases"]["cold_recovery"].values()]
    for template in benches:
        argv = fill(template, VALUES)
        assert argv[argv.index("--tokenizer") + 1] == VALUES["model_path"]
        assert argv[argv.index("--served-model-name") + 1] == VALUES["model"]


def test_vllm_derives_max_model_len_instead_of_a_fixed_default():
    assert "max_model_len" not in PROFILES["vllm"]["parameters"]


def test_cold_recovery_seeds_with_the_timed_prompts_and_flushes_with_unrelated_ones():
    commands = PROFILES["vllm"]["commands"]
    timed = fill(commands["bench"]["cold_recovery"], VALUES)
    seed = fill(commands["phases"]["cold_recovery"]["seed"], VALUES)
    flush = fill(commands["phases"]["cold_recovery"]["flush"], VALUES)

    def value(argv, flag):
        return argv[argv.index(flag) + 1]

    # The seed run is the timed run with one output token: vllm bench draws each prefix after
    # the previous prefix's suffixes, so only identical arguments give identical prompts.
    for flag in (
        "--prefix-repetition-prefix-len",
        "--prefix-repetition-suffix-len",
        "--prefix-repetition-num-prefixes",
        "--num-prompts",
        "--seed",
    ):
        assert value(seed, flag) == value(timed, flag), flag
    assert value(seed, "--prefix-repetition-output-len") == "1"
    assert value(flush, "--dataset-name") == "random"
    assert value(flush, "--random-input-len") == str(VALUES["input_len"])
    assert value(flush, "--num-prompts") == "40" and value(flush, "--seed") == "99"
    results = {value(argv, "--result-filename") for argv in (timed, seed, flush)}
    assert results == {"result.json", "seed.json", "flush.json"}


def test_the_lmcache_server_is_sized_by_offload_gib_on_the_port_vllm_expects():
    server = PROFILES["vllm"]["commands"]["offload_servers"]["lmcache"]
    start = fill(server["start"], VALUES)
    assert start[:2] == ["lmcache", "server"]
    assert start[start.index("--l1-size-gb") + 1] == "256.0"
    # vLLM >= 0.25's LMCacheMPConnector connects to tcp://localhost:5555 unless told otherwise.
    assert start[start.index("--port") + 1] == "5555"
    assert start[start.index("--eviction-policy") + 1] == "LRU"
    health = fill(server["health"], VALUES)
    assert health[-2:] == ["http://127.0.0.1:8080", "/healthcheck"]
