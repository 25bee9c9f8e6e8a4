"""A real `simhost serve` process, driven by real clients (openai, urllib, prometheus parser)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from simhost.textgen import join_words, tokenize, vocab
from tests.simhost.conftest import (
    FIXTURES,
    REPO,
    free_port,
    healthy,
    run_simhost,
    simhost_env,
    start_server,
    wait_until,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve"), "--time-scale", "0.05")
    yield running
    running.stop()


def post(url: str, body, timeout: float = 10.0):
    """(status, parsed JSON body); the body may be raw bytes to send as is."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def metrics(url: str) -> dict:
    """sample name + sorted labels -> value, from prometheus_client's own parser."""
    samples = {}
    for family in text_string_to_metric_families(get(url + "/metrics")):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels) -> float:
    return sum(
        v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()
    )


def test_the_official_openai_client_streams_a_completion(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    stream = client.completions.create(
        model="sim-1b",
        prompt="tell me about kv caches",
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    usage = [c.usage for c in chunks if c.usage][-1]
    assert len(text.split()) == 12
    sent = len(tokenize("tell me about kv caches"))
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
        sent,
        12,
        sent + 12,
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    whole = client.completions.create(
        model="sim-1b", prompt="tell me about kv caches", max_tokens=12, temperature=0
    )
    assert whole.choices[0].text == text


def test_the_official_openai_client_streams_a_chat_completion(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="sim-1b",
        messages=[{"role": "user", "content": "hi there"}],
        max_tokens=5,
        temperature=0,
        stream=True,
    )
    deltas = [c.choices[0].delta for c in stream if c.choices]
    assert deltas[0].role == "assistant"
    assert len("".join(d.content or "" for d in deltas).split()) == 5


def test_the_service_endpoints_answer_like_vllm(server):
    assert healthy(server.url)
    models = json.loads(get(server.url + "/v1/models"))
    assert [m["id"] for m in models["data"]] == ["sim-1b"]
    assert models["data"][0]["max_model_len"] == 32768
    assert json.loads(get(server.url + "/version")) == {"version": "0.20.1"}


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (b'{"prompt": "unterminated', 400, "BadRequestError"),
        ({"model": "gpt-4", "prompt": "hi"}, 404, "NotFoundError"),
        ({"prompt": "hi", "max_tokens": -5}, 400, "BadRequestError"),
        ({"prompt": "word " * 32760, "max_tokens": 100}, 400, "BadRequestError"),
        ({"prompt": ""}, 400, "BadRequestError"),
    ],
)
def test_bad_requests_get_openai_style_json_errors(server, body, status, kind):
    code, payload = post(server.url + "/v1/completions", body)
    assert code == status
    assert payload["error"]["type"] == kind
    assert payload["error"]["code"] == status and payload["error"]["message"]
    assert healthy(server.url)


def test_an_unknown_route_is_a_json_404(server):
    code, payload = post(server.url + "/v1/embeddings", {"input": "x"})
    assert code == 404 and payload["error"]["code"] == 404


def test_metrics_carry_vllms_names_and_count_prefix_hits_in_tokens(server):
    prompt = join_words(vocab()[:64])  # 64 tokens: 4 blocks of 16
    before = metrics(server.url)
    post(server.url + "/v1/completions", {"prompt": prompt, "max_tokens": 3})
    post(server.url + "/v1/completions", {"prompt": prompt, "max_tokens": 3})
    after = metrics(server.url)
    queried = value(after, "vllm:prefix_cache_queries_total") - value(
        before, "vllm:prefix_cache_queries_total"
    )
    hits = value(after, "vllm:prefix_cache_hits_total") - value(
        before, "vllm:prefix_cache_hits_total"
    )
    assert queried == 128
    assert hits == 48  # the second request hits 3 of its 4 full blocks (the last token is computed)
    assert 0.0 <= value(after, "vllm:kv_cache_usage_perc") <= 1.0
    finished = value(after, "vllm:request_success_total", finished_reason="length")
    assert finished - value(before, "vllm:request_success_total", finished_reason="length") == 2
    assert value(after, "vllm:time_to_first_token_seconds_count") >= 2
    assert value(after, "vllm:e2e_request_latency_seconds_bucket", le="+Inf") >= 2
    assert value(after, "process_resident_memory_bytes") > 0


def test_cache_config_info_carries_the_labels_vllm_uses(server):
    (labels,) = [
        dict(ls) for (n, ls), _ in metrics(server.url).items() if n == "vllm:cache_config_info"
    ]
    assert labels["enable_prefix_caching"] == "True"
    assert labels["kv_offloading_size"] == "None"
    assert int(labels["num_gpu_blocks"]) * int(labels["block_size"]) == int(
        labels["kv_cache_size_tokens"]
    )
    assert {"engine", "gpu_memory_utilization", "num_cpu_blocks", "cache_dtype"} <= set(labels)


def test_greedy_output_is_the_same_with_offload_on_and_off(serve):
    resident = serve("--time-scale", "0.02")
    offload = serve("--time-scale", "0.02", "--kv-offloading-size", "8")
    body = {"prompt": "the same prompt for both arms", "max_tokens": 20, "temperature": 0}
    first = post(resident.url + "/v1/completions", body)[1]["choices"][0]["text"]
    second = post(offload.url + "/v1/completions", body)[1]["choices"][0]["text"]
    assert first == second
    samples = metrics(offload.url)
    labels = next(dict(ls) for (n, ls), _ in samples.items() if n == "vllm:cache_config_info")
    assert labels["kv_offloading_size"] == "8.0"
    assert value(samples, "vllm:kv_offload_total_bytes_total", transfer_type="GPU_to_CPU") > 0


def test_recompute_arm_reports_prefix_caching_off_and_never_hits(serve):
    server = serve("--time-scale", "0.02", "--no-enable-prefix-caching")
    prompt = " ".join(f"w{i}" for i in range(64))
    for _ in range(2):
        post(server.url + "/v1/completions", {"prompt": prompt, "max_tokens": 2})
    samples = metrics(server.url)
    assert value(samples, "vllm:prefix_cache_hits_total") == 0
    labels = next(dict(ls) for (n, ls), _ in samples.items() if n == "vllm:cache_config_info")
    assert labels["enable_prefix_caching"] == "False"
    assert not [n for (n, _), _ in samples.items() if n.startswith("vllm:kv_offload")]


def test_it_runs_detached_and_publishes_gpu_memory_to_smi(tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    serve = f"{sys.executable} -m simhost serve --port {port}"
    command = f"setsid nohup {serve} </dev/null >{log} 2>&1 & echo $!"
    env = simhost_env(tmp_path / "state")
    pid = int(
        subprocess.run(
            ["bash", "-c", command], env=env, cwd=REPO, capture_output=True, text=True
        ).stdout
    )
    try:
        assert wait_until(lambda: healthy(f"http://127.0.0.1:{port}"), 15)
        assert "vLLM test double" in log.read_text()
        csv = wait_until(
            lambda: (
                run_simhost(
                    [
                        "smi",
                        "--format",
                        "nvidia-csv",
                        "--query-gpu",
                        "memory.used",
                        "--csv-options",
                        "noheader,nounits",
                    ],
                    tmp_path / "state",
                ).stdout
            ),
            5,
        )
        assert int(csv.splitlines()[0]) > 60000  # 0.9 of 81559 MiB reserved, as vLLM does
    finally:
        os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), 10)
    idle = run_simhost(
        [
            "smi",
            "--format",
            "nvidia-csv",
            "--query-gpu",
            "memory.used",
            "--csv-options",
            "noheader,nounits",
        ],
        tmp_path / "state",
    )
    assert int(idle.stdout.splitlines()[0]) < 10
    assert "simhost: stopped" in log.read_text()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] == "Z"
    except OSError:
        return True


def test_a_client_that_leaves_mid_stream_frees_its_sequence(serve):
    server = serve("--time-scale", "1")
    request = {"prompt": "long answer please", "max_tokens": 500, "stream": True}
    body = json.dumps(request).encode()
    head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head.encode() + body)
        received = b""
        while b"data: " not in received:  # wait until streaming has begun
            received += sock.recv(4096)
    aborted = wait_until(
        lambda: value(metrics(server.url), "vllm:request_success_total", finished_reason="abort"),
        10,
    )
    assert aborted == 1
    assert value(metrics(server.url), "vllm:num_requests_running") == 0
    assert "internal error" not in server.output()
    assert healthy(server.url)


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


# vLLM 0.32 families simhost leaves out, and why: the FLOP/byte estimates need a cost model of
# the kernels, and iteration token counts buckets by CUDA-graph sizes simhost does not have.
ABSENT_FROM_SIMHOST = {
    "vllm:estimated_flops_per_gpu",
    "vllm:estimated_read_bytes_per_gpu",
    "vllm:estimated_write_bytes_per_gpu",
    "vllm:iteration_tokens_total",
}


def test_every_vllm_series_and_cache_label_exists_in_a_real_vllm_scrape(server):
    real = _families((FIXTURES / "tollgate__metrics_vllm_0.32.0_cpu_idle.txt").read_text())
    ours = _families(get(server.url + "/metrics"))
    vllm_names = {name for name in ours if name.startswith("vllm:")}
    offload_only = {name for name in vllm_names if name.startswith("vllm:kv_offload")}
    assert vllm_names - offload_only <= set(real)
    real_names = {n for n in real if n.startswith("vllm:") and not n.endswith("_created")}
    assert real_names - vllm_names == ABSENT_FROM_SIMHOST
    assert "vllm:external_prefix_cache_hits" in vllm_names
    for name in vllm_names - offload_only:
        assert ours[name].type == real[name].type, name
    real_labels = set(real["vllm:cache_config_info"].samples[0].labels)
    assert set(ours["vllm:cache_config_info"].samples[0].labels) == real_labels


def test_cached_prompt_tokens_are_counted_by_source(server):
    prompt = join_words(vocab()[64:128])  # 64 tokens no other test of this server sends
    before = metrics(server.url)
    post(server.url + "/v1/completions", {"prompt": prompt, "max_tokens": 2})
    post(server.url + "/v1/completions", {"prompt": prompt, "max_tokens": 2})
    after = metrics(server.url)

    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    device = grew("vllm:prompt_tokens_cached_by_source_total", source="device")
    assert device == grew("vllm:prompt_tokens_cached_total") == 48
    assert grew("vllm:request_prefill_time_seconds_count") == 2
    assert grew("vllm:request_params_max_tokens_sum") == 4


def _timing_event(stream: bytes) -> dict:
    (line,) = [line for line in stream.split(b"\n") if b'"simhost"' in line]
    return json.loads(line[len(b"data: ") :])["simhost"]


def test_time_a_request_waits_for_a_stalled_server_counts_as_server_time(serve):
    server = serve("--time-scale", "0.05", "--clock", "wall")  # wall stamps are under test
    body = json.dumps({"prompt": "hello there", "max_tokens": 2, "stream": True}).encode()
    head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Simhost-Timing: 1\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # accepted before the stall
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            sock.sendall(head.encode() + body)  # the kernel queues it; the server cannot read
            time.sleep(0.2)  # the stall under test
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        stream = b""
        while b"data: [DONE]" not in stream:
            piece = sock.recv(65536)
            assert piece, "the server closed the stream early"
            stream += piece
    timing = _timing_event(stream)
    assert timing["handler_s"] - timing["arrival_s"] >= 0.15
    ttft = timing["first_token_s"] - timing["arrival_s"]
    assert timing["server_ttft_s"] == pytest.approx(ttft)


def test_tokenize_and_detokenize_answer_as_vllm_with_the_real_tokenizer(server):
    status, counted = post(server.url + "/tokenize", {"model": "sim-1b", "prompt": "hello world"})
    assert status == 200 and counted["tokens"] == tokenize("hello world")
    assert counted["count"] == len(counted["tokens"]) and counted["token_strs"] is None
    assert counted["max_model_len"] == 32768
    status, back = post(
        server.url + "/detokenize", {"model": "sim-1b", "tokens": counted["tokens"]}
    )
    assert (status, back) == (200, {"prompt": "hello world"})
    status, refused = post(server.url + "/detokenize", {"tokens": [10**9]})
    assert status == 400 and refused["error"]["param"] == "tokens"


def test_continuous_usage_stats_put_usage_so_far_in_every_chunk(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    stream = client.completions.create(
        model="sim-1b",
        prompt="tell me about kv caches",
        max_tokens=6,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )
    counts = [c.usage.completion_tokens for c in stream if c.choices and c.usage]
    assert counts == [1, 2, 3, 4, 5, 6]


def test_n_choices_and_echo_as_vllm_answers_them(server):
    prompt = "tell me about kv caches"
    status, body = post(
        server.url + "/v1/completions",
        {"prompt": prompt, "max_tokens": 4, "temperature": 0, "n": 3, "echo": True},
    )
    assert status == 200 and [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert all(c["text"].startswith(prompt) for c in body["choices"])
    assert len({c["text"] for c in body["choices"]}) == 1  # greedy: the same answer thrice
    assert body["usage"]["completion_tokens"] == 12


def test_a_long_prompt_is_refused_and_max_tokens_is_clamped_as_in_vllm_0_32(server):
    words = vocab()
    too_long = join_words([words[i % len(words)] for i in range(32769)])
    status, body = post(server.url + "/v1/completions", {"prompt": too_long, "max_tokens": 1})
    assert status == 400 and body["error"]["param"] == "input_tokens"
    assert "your prompt contains at least 32769 input tokens" in body["error"]["message"]
    fits = join_words([words[i % len(words)] for i in range(32760)])
    status, body = post(
        server.url + "/v1/completions", {"prompt": fits, "max_tokens": 50}, timeout=60
    )
    assert status == 200 and body["usage"]["completion_tokens"] == 8
    assert body["choices"][0]["finish_reason"] == "length"


def test_models_carry_vllms_root_and_permission_fields(server):
    card = json.loads(get(server.url + "/v1/models"))["data"][0]
    assert card["root"] == card["id"] and card["parent"] is None
    (permission,) = card["permission"]
    assert permission["object"] == "model_permission" and permission["allow_sampling"] is True
