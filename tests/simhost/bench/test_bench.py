"""`simhost bench` against real `simhost serve` processes, including the two model outcomes."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from simhost.bench.args import bench_settings
from simhost.bench.run import measure
from simhost.cli import build_parser
from simhost.scenarios import SCENARIOS, arm_flags
from tests.simhost.conftest import FIXTURES, run_simhost
from tests.simhost.server.test_server import metrics, value


def bench(server, tmp_path, *flags: str) -> dict:
    """Run a bench, return its saved result."""
    result_dir = tmp_path / "results"
    done = run_simhost(
        [
            "bench",
            "--base-url",
            server.url,
            "--save-result",
            "--result-dir",
            str(result_dir),
            *flags,
        ],
        server.state_dir,
    )
    assert done.returncode == 0, done.stderr
    assert "Serving Benchmark Result" in done.stdout
    (path,) = sorted(result_dir.iterdir())
    return json.loads(path.read_text())


def test_a_bench_result_file_has_the_keys_of_a_real_vllm_result(serve, tmp_path):
    server = serve("--time-scale", "0.02")
    result = bench(
        server,
        tmp_path,
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--num-prompts",
        "12",
        "--max-concurrency",
        "4",
    )
    real = json.loads((FIXTURES / "er0080__bench_serve_v0.25.1__opt-125m_cpu.json").read_text())
    assert set(result) == set(real)
    assert (result["completed"], result["failed"], result["total_output_tokens"]) == (12, 0, 96)
    assert result["model_id"] == "sim-1b"  # asked from /v1/models, as vLLM's bench does
    assert result["max_concurrency"] == 4 and result["request_rate"] == "inf"
    assert 0 < result["median_ttft_ms"] < 1000


def test_the_default_file_name_follows_vllms_pattern(serve, tmp_path):
    server = serve("--time-scale", "0.02")
    bench(
        server,
        tmp_path,
        "--num-prompts",
        "2",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--max-concurrency",
        "2",
        "--label",
        "demo",
    )
    (path,) = (tmp_path / "results").iterdir()
    assert path.name.startswith("demo-infqps-concurrency2-sim-1b-") and path.suffix == ".json"


def test_append_result_writes_one_json_line_per_run(serve, tmp_path):
    server = serve("--time-scale", "0.02")
    target = tmp_path / "runs.jsonl"
    flags = [
        "bench",
        "--base-url",
        server.url,
        "--num-prompts",
        "2",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--append-result",
        "--result-filename",
        str(target),
    ]
    for _ in range(2):
        assert run_simhost(flags, server.state_dir).returncode == 0
    lines = target.read_text().splitlines()
    assert [json.loads(line)["completed"] for line in lines] == [2, 2]


def test_detailed_results_carry_texts_that_repeat_under_greedy_decoding(serve, tmp_path):
    server = serve("--time-scale", "0.02")
    flags = [
        "--num-prompts",
        "4",
        "--random-input-len",
        "16",
        "--random-output-len",
        "6",
        "--temperature",
        "0",
        "--seed",
        "9",
        "--save-detailed",
    ]
    first = bench(server, tmp_path / "a", *flags)
    second = bench(server, tmp_path / "b", *flags)
    assert first["generated_texts"] == second["generated_texts"]
    assert all(len(text.split()) == 6 for text in first["generated_texts"])
    assert len(first["server_ttfts"]) == 4 and first["errors"] == [""] * 4


def test_the_served_name_is_asked_for_while_model_names_the_tokenizer_path(serve, tmp_path):
    # The vllm profile passes --model NAME --tokenizer PATH --served-model-name NAME.
    server = serve("--time-scale", "0.02")
    flags = [
        "--model",
        "/models/weights",
        "--served-model-name",
        "sim-1b",
        "--tokenizer",
        "/models/weights",
        "--num-prompts",
        "3",
        "--random-input-len",
        "16",
        "--random-output-len",
        "2",
        "--max-concurrency",
        "1",
        "--save-detailed",
    ]
    result = bench(server, tmp_path, *flags)
    assert result["completed"] == 3 and result["tokenizer_id"] == "/models/weights"
    assert len(result["latencies"]) == len(result["queue_times"]) == 3
    # Equal when both tokens came in one read (a loaded box coalesces chunks), as in vLLM's.
    assert all(
        latency >= ttft for latency, ttft in zip(result["latencies"], result["ttfts"], strict=True)
    )


@pytest.mark.skipif(sys.platform != "linux", reason="perf_counter is CLOCK_MONOTONIC on Linux")
def test_each_request_keeps_its_stamps_in_order_on_both_hosts_clocks(serve):
    server = serve("--time-scale", "0.02", "--clock", "wall")  # the client's own stamps
    flags = ["--num-prompts", "6", "--random-input-len", "16", "--random-output-len", "4"]
    args = build_parser().parse_args(["bench", "--base-url", server.url, *flags])
    measurement = asyncio.run(measure(bench_settings(args)))
    assert len(measurement.requests) == 6
    for request in measurement.requests:
        outcome, timing = request.outcome, request.timing
        assert outcome.success
        received = outcome.start_time + outcome.ttft
        assert outcome.start_time < timing["arrival_s"] <= timing["handler_s"]
        assert timing["handler_s"] < timing["first_token_s"] < received
        assert outcome.server_ttft == pytest.approx(timing["first_token_s"] - timing["arrival_s"])
        assert outcome.ttft <= request.user_ttft  # the kernel saw the bytes before the loop did


def test_a_finite_request_rate_spaces_the_arrivals(serve, tmp_path):
    server = serve("--time-scale", "0.01")
    result = bench(
        server,
        tmp_path,
        "--num-prompts",
        "10",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--request-rate",
        "40",
    )
    assert result["request_rate"] == 40.0 and result["completed"] == 10
    # nine gamma(1) gaps of mean 25 ms: the sum is below 45 ms with probability < 1e-4
    assert result["duration"] > 0.045


def test_failed_requests_are_counted_not_hidden(serve, tmp_path):
    server = serve("--time-scale", "0.02", "--fault-error-rate", "1")
    result = bench(
        server,
        tmp_path,
        "--num-prompts",
        "5",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--model",
        "sim-1b",
    )
    assert (result["completed"], result["failed"], result["mean_ttft_ms"]) == (0, 5, 0.0)


def test_cold_recovery_sizes_its_flush_from_the_servers_kv_cache_and_hits_the_tier(serve, tmp_path):
    server = serve(
        "--time-scale", "0.02", "--num-gpu-blocks-override", "2048", "--kv-offloading-size", "16"
    )
    result = bench(
        server,
        tmp_path,
        "--dataset-name",
        "cold_recovery",
        "--prefix-repetition-prefix-len",
        "1024",
        "--prefix-repetition-suffix-len",
        "32",
        "--prefix-repetition-num-prefixes",
        "4",
        "--prefix-repetition-output-len",
        "4",
        "--num-prompts",
        "8",
        "--max-concurrency",
        "4",
    )
    assert result["completed"] == 8 and result["num_prompts"] == 8
    samples = metrics(server.url)
    assert value(samples, "vllm:external_prefix_cache_hits_total") >= 4 * 1024
    assert value(samples, "vllm:kv_offload_total_bytes_total", transfer_type="CPU_to_GPU") > 0


def test_an_unreachable_server_is_one_clear_line(tmp_path):
    done = run_simhost(
        ["bench", "--base-url", "http://127.0.0.1:9", "--num-prompts", "1"], tmp_path
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "/v1/models" in done.stderr


def _run_arm(serve, tmp_path, scenario_name: str, arm: str, *flags: str) -> dict:
    scenario = SCENARIOS[scenario_name]
    server = serve("--scenario", scenario_name, *arm_flags(arm, scenario), *flags)
    result = bench(server, tmp_path / arm, "--scenario", scenario_name)
    server.stop()
    return result


@pytest.mark.slow
def test_offload_wins_end_to_end_on_long_context_cold_recovery_at_concurrency_16(serve, tmp_path):
    results = {
        arm: _run_arm(serve, tmp_path, "offload-helps-compact", arm)
        for arm in ("resident", "offload", "recompute")
    }
    resident, offload, recompute = results["resident"], results["offload"], results["recompute"]
    assert all(r["completed"] == 32 and r["max_concurrency"] == 16 for r in results.values())
    assert offload["median_ttft_ms"] < 0.7 * resident["median_ttft_ms"]
    assert offload["output_throughput"] > 1.2 * resident["output_throughput"]
    assert recompute["median_ttft_ms"] > 3 * offload["median_ttft_ms"]


@pytest.mark.slow
def test_offload_gains_nothing_end_to_end_on_short_prompts_at_concurrency_1(serve, tmp_path):
    # Interleaved R O O R, each arm's best of two: scheduling noise on a shared 2-core box
    # only ever adds time, so the faster of two runs is the closer to the model's figure. The
    # scenario's run-to-run speed noise (4 % CV per server session) is off: this compares the
    # model's two arms, and with it on the throughput ratio's spread (5.7 %) crossed the bounds.
    order = ["resident", "offload", "offload", "resident"]
    runs = [
        (arm, _run_arm(serve, tmp_path / f"{i}", "offload-does-not-help", arm, "--noise-cv", "0"))
        for i, arm in enumerate(order)
    ]
    best = {
        arm: min((r for a, r in runs if a == arm), key=lambda r: r["median_ttft_ms"])
        for arm in ("resident", "offload")
    }
    resident, offload = best["resident"], best["offload"]
    assert offload["max_concurrency"] == 1
    # The model says +1 % (exact, in virtual time: tests/simhost/test_engine.py).
    assert 0.95 < offload["median_ttft_ms"] / resident["median_ttft_ms"] < 1.15
    assert 0.90 < offload["output_throughput"] / resident["output_throughput"] < 1.05
