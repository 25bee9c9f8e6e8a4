"""The built-in profiles: every template fills with valid values, and each arm's vLLM flags are
exactly what DESIGN and formats.md section 2 require."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.commands import fill, placeholders_in, to_shell
from runners.engine import engine_of
from runners.errors import SpecError

UNFILLED = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
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
    "lmcache_mp_port": 5555,
    "mooncake_rpc_port": 50051,
    "mooncake_metrics_port": 9003,
    "mooncake_metadata_port": 8080,
    "mooncake_config_path": "/etc/mooncake.json",
    "kvbm_cpu_cache_gb": 256,
    "kvbm_metrics_port": 6880,
    "mem_fraction_static": 0.85,
    "page_size": 64,
    "hicache_ratio": 2,
    "hicache_write_policy": "write_through",
    "prompts_per_prefix": 1,
    "flush_prompts": 40,
    "flush_seed": 99,
    "replay_file": "/tmp/tollgate/r/replay-c16.jsonl",
    "records_file": "/tmp/tollgate/r/b/records.jsonl",
    "timed_trace_file": "/tmp/tollgate/r/replay-c16.jsonl",
    "replay_prompts": 148,
    "trace_block_tokens": 512,
    "replay_seed": 21,
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
            if isinstance(template, list):
                yield f"offload_servers.{backend}.{part}", template
    for index, service in enumerate(commands.get("engine", {}).get("side_services", [])):
        for part in ("start", "health", "metrics"):
            if service.get(part):
                yield f"engine.side_services[{index}].{part}", service[part]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_template_fills_with_valid_values(name):
    for where, template in templates(PROFILES[name]):
        argv = fill(template, VALUES)
        # A JSON argument (--kv-transfer-config) keeps its braces; no placeholder is left.
        assert not any(UNFILLED.search(token) for token in argv), where


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
        if dataset == "trace":  # the client's hash seed first (see the trace test below)
            argv = argv[2:]
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


def test_the_vllm_trace_replay_is_vllms_timed_trace_under_a_pinned_hash_seed():
    argv = fill(PROFILES["vllm"]["commands"]["bench"]["trace"], VALUES)
    # vLLM seeds each hash id's chunk with Python's hash(): pinned, every arm gets one prompt.
    assert argv[:2] == ["env", "PYTHONHASHSEED=21"]

    def flag(name: str) -> str:
        return argv[argv.index(name) + 1]

    assert flag("--dataset-name") == "timed_trace"
    assert flag("--dataset-path") == VALUES["timed_trace_file"]
    assert flag("--num-prompts") == "148" and flag("--timed-trace-chunk-hash-size") == "512"
    assert flag("--timed-trace-sec-multiplier") == "1" and "--self-timed" in argv
    # No request outside the trace: neither a readiness probe nor warm-ups.
    assert flag("--num-warmups") == "0" and flag("--ready-check-timeout-sec") == "0"
    assert "--save-detailed" in argv and flag("--result-filename") == "result.json"


@pytest.mark.parametrize(
    "name, value",
    [
        ("replay_seed", "1; rm -rf /"),
        ("replay_seed", 2**32),
        ("timed_trace_file", "/tmp/x y/$(id).jsonl"),
        ("timed_trace_file", "relative.jsonl"),
        ("replay_prompts", 0),
        ("trace_block_tokens", "16 --self-timed"),
    ],
)
def test_the_vllm_trace_replay_refuses_values_that_are_not_what_they_claim(name, value):
    with pytest.raises(SpecError, match=name):
        fill(PROFILES["vllm"]["commands"]["bench"]["trace"], {**VALUES, name: value})


def test_the_vllm_trace_replay_quotes_as_one_word_per_argument_on_the_host():
    argv = fill(PROFILES["vllm"]["commands"]["bench"]["trace"], VALUES)
    assert shlex.split(to_shell(argv)) == argv


def test_vllm_derives_max_model_len_instead_of_a_fixed_default():
    assert "max_model_len" not in PROFILES["vllm"]["parameters"]


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def cold_recovery_lines(profile: str) -> tuple[list[str], list[str], list[str]]:
    """A profile's timed, seed and flush bench lines for cold recovery, filled."""
    commands = PROFILES[profile]["commands"]
    phases = commands["phases"]["cold_recovery"]
    timed = fill(commands["bench"]["cold_recovery"], VALUES)
    return timed, fill(phases["seed"], VALUES), fill(phases["flush"], VALUES)


def test_cold_recovery_seeds_with_the_timed_prompts_and_flushes_with_unrelated_ones():
    timed, seed, flush = cold_recovery_lines("vllm")
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
    # lmcache 0.5.6's HTTP frontend routes /healthcheck (http_apis/info_api.py); the
    # quickstart's /api/healthcheck is a 404 there.
    assert health[-2:] == ["http://127.0.0.1:8080", "/healthcheck"]
    metrics = fill(server["metrics"], VALUES)
    assert metrics[-3:] == ["metrics", "http://127.0.0.1:8080", "/metrics"]
    assert server["metrics_tool"] == "lmcache-metrics"


def test_the_sglang_arms_use_exactly_the_flags_that_select_them():
    serve = {arm: fill(t, VALUES) for arm, t in PROFILES["sglang"]["commands"]["serve"].items()}
    assert all(argv[1:3] == ["-m", "sglang.launch_server"] for argv in serve.values())
    # Resident: SGLang's radix cache is on by default; no host tier.
    assert not any(
        a.startswith(("--hicache", "--enable-hierarchical", "--disable-radix"))
        for a in serve["resident"]
    )
    offload = serve["offload"]
    assert "--enable-hierarchical-cache" in offload and "--disable-radix-cache" not in offload
    assert offload[offload.index("--hicache-ratio") + 1] == "2.0"
    assert offload[offload.index("--hicache-write-policy") + 1] == "write_through"
    assert "--disable-radix-cache" in serve["recompute"]
    assert not any(a.startswith(("--hicache", "--enable-hierarchical")) for a in serve["recompute"])
    assert all("--enable-metrics" in argv for argv in serve.values())


def test_sglang_benches_write_json_lines_with_per_request_errors():
    commands = PROFILES["sglang"]["commands"]
    assert commands["engine"]["bench_tool"] == "sglang-bench"
    for dataset, template in commands["bench"].items():
        argv = fill(template, VALUES)
        assert argv[1:3] == ["-m", "sglang.bench_serving"], dataset
        assert argv[argv.index("--output-file") + 1] == "/tmp/tollgate/r/b/result.json"
        assert "--output-details" in argv and argv[argv.index("--temperature") + 1] == "0"
        assert argv[argv.index("--warmup-requests") + 1] == "0"


def test_sglang_cold_recovery_seeds_with_the_timed_prompts():
    timed, seed, flush = cold_recovery_lines("sglang")
    for flag in (
        "--gsp-num-groups",
        "--gsp-prompts-per-group",
        "--gsp-system-prompt-len",
        "--gsp-question-len",
        "--seed",
    ):
        assert value(seed, flag) == value(timed, flag), flag
    assert value(seed, "--gsp-output-len") == "1"
    # random-ids: SGLang's "random" samples ShareGPT text, downloaded when no path is given.
    assert value(flush, "--dataset-name") == "random-ids" and value(flush, "--seed") == "99"


def test_the_vllm_aiperf_profile_serves_and_probes_exactly_as_the_vllm_profile():
    aiperf, vllm = PROFILES["vllm-aiperf"], PROFILES["vllm"]
    for section in ("serve", "probes", "offload_servers"):
        assert aiperf["commands"][section] == vllm["commands"][section], section
    assert aiperf["parameters"] == vllm["parameters"]


def test_aiperf_benches_write_the_summary_the_bench_step_fetches():
    for dataset, template in PROFILES["vllm-aiperf"]["commands"]["bench"].items():
        argv = fill(template, VALUES)
        assert argv[:2] == ["aiperf", "profile"], dataset
        # --profile-export-prefix result.json makes AIPerf write result.json, result.jsonl.
        assert value(argv, "--artifact-dir") == VALUES["result_dir"]
        assert value(argv, "--profile-export-prefix") == VALUES["result_filename"]
        assert value(argv, "--concurrency") == "16" and "--streaming" in argv
        assert value(argv, "--tokenizer") == VALUES["model_path"]


def test_aiperf_cold_recovery_seeds_with_the_timed_prefix_pool_and_flushes_with_random_prompts():
    timed, seed, flush = cold_recovery_lines("vllm-aiperf")
    for flag in ("--prompt-prefix-pool-size", "--prompt-prefix-length", "--isl", "--random-seed"):
        assert value(seed, flag) == value(timed, flag), flag
    assert value(seed, "--osl") == "1" and value(flush, "--osl") == "1"
    assert "--prompt-prefix-pool-size" not in flush
    assert value(flush, "--request-count") == "40" and value(flush, "--random-seed") == "99"
    exports = {value(argv, "--profile-export-prefix") for argv in (timed, seed, flush)}
    assert exports == {"result.json", "seed.json", "flush.json"}


@pytest.mark.parametrize("name", ["lmcache", "simhost-lmcache"])
def test_the_lmcache_profiles_run_lmcaches_server_beside_vllms_mp_connector(name):
    commands = PROFILES[name]["commands"]
    (service,) = engine_of(commands).services_for("offload", VALUES)
    assert engine_of(commands).services_for("resident", VALUES) == []
    assert engine_of(commands).hit_proof_service == "lmcache" == service.name
    start = fill(service.start, VALUES)
    # lmcache 0.5.6's `lmcache server`: ZMQ on --port, the L1 tier, its HTTP frontend.
    assert start[:2] == ["lmcache", "server"] or start[2:4] == ["simhost", "lmcache-server"]
    assert start[start.index("--port") + 1] == "5555"
    assert start[start.index("--l1-size-gb") + 1] == "256.0"
    # Its HTTP frontend answers /healthcheck and serves the lookup counters on /metrics; it
    # starts no Prometheus server of its own (a --prometheus-port there is unused).
    assert "--prometheus-port" not in start
    assert fill(service.health, VALUES)[-2:] == ["http://127.0.0.1:8080", "/healthcheck"]
    assert fill(service.metrics, VALUES)[-2:] == ["http://127.0.0.1:8080", "/metrics"]
    offload = fill(commands["serve"]["offload"], VALUES)
    config = json.loads(offload[offload.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == "LMCacheMPConnector" and config["kv_role"] == "kv_both"
    assert config["kv_connector_extra_config"]["lmcache.mp.port"] == 5555
    assert "--kv-offloading-size" not in offload


def test_simhost_lmcache_is_the_lmcache_profile_with_simhost_in_place_of_vllm_and_lmcache():
    real, sim = PROFILES["lmcache"]["commands"], PROFILES["simhost-lmcache"]["commands"]
    assert real["engine"]["hit_proof"] == sim["engine"]["hit_proof"]
    offload = [c["serve"]["offload"] for c in (real, sim)]
    transfer = {argv[argv.index("--kv-transfer-config") + 1] for argv in offload}
    assert len(transfer) == 1
    (real_service,), (sim_service,) = (c["engine"]["side_services"] for c in (real, sim))
    assert sim_service["start"][4:-2] == real_service["start"][2:]
    assert sim_service["health"] == real_service["health"]
    assert sim_service["metrics"] == real_service["metrics"]
