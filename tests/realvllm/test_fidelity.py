"""simhost against a real vLLM, as the same real clients see them (`make test-vllm`).

One real vLLM 0.32 (CPU, the tiny model) and one simhost, both with max_model_len 1024 and the
same tokenizer file; the real `vllm bench serve` and plain HTTP clients ask both the same
things. Tolerances: token counts exact (same tokenizer), result files the same keys, usage in
every stream chunk when asked, error text for an over-long prompt identical.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
import urllib.request

import pytest

from simhost.textgen import join_words, vocab
from tests.realvllm.pair import MAX_MODEL_LEN, NAME, post, prompts, stream

pytestmark = pytest.mark.slow


def test_both_count_the_same_prompt_tokens_in_tokenize_and_usage(servers):
    for prompt in prompts(16, 64, seed=1):
        counted = {}
        for name, url in servers.items():
            status, tokens = post(url + "/tokenize", {"model": NAME, "prompt": prompt})
            assert status == 200, tokens
            status, answer = post(
                url + "/v1/completions", {"model": NAME, "prompt": prompt, "max_tokens": 2}
            )
            assert status == 200, answer
            assert answer["usage"]["prompt_tokens"] == tokens["count"]
            counted[name] = (tokens["tokens"], set(tokens), answer["usage"]["completion_tokens"])
        assert counted["vllm"] == counted["simhost"], prompt


def test_both_send_usage_in_every_chunk_when_asked(servers):
    body = {
        "model": NAME,
        "prompt": prompts(1, 32, seed=2)[0],
        "max_tokens": 5,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    seen = {}
    for name, url in servers.items():
        chunks = stream(url + "/v1/completions", body)
        with_text = [c for c in chunks if c["choices"]]
        seen[name] = [c["usage"]["completion_tokens"] for c in with_text]
        assert chunks[-1]["usage"]["completion_tokens"] == 5
    assert seen["simhost"] == [1, 2, 3, 4, 5]
    # vLLM sends a chunk per token unless the client falls behind its engine (a loaded box):
    # then its output processor hands several tokens to one chunk, whose usage counts them all.
    real = seen["vllm"]
    assert real == sorted(set(real)) and real[-1] == 5, real


def test_both_refuse_an_over_long_prompt_with_the_same_words(servers):
    prompt = join_words(random.Random(3).choices(vocab(), k=MAX_MODEL_LEN + 50))
    answers = {
        name: post(url + "/v1/completions", {"model": NAME, "prompt": prompt, "max_tokens": 4})
        for name, url in servers.items()
    }
    (status, real), (sim_status, sim) = answers["vllm"], answers["simhost"]
    assert status == sim_status == 400
    assert sim["error"]["message"] == real["error"]["message"]
    assert sim["error"]["param"] == real["error"]["param"]


def test_models_and_tokenize_answer_the_same_fields(servers):
    cards = {}
    for name, url in servers.items():
        with urllib.request.urlopen(url + "/v1/models", timeout=10) as response:
            cards[name] = json.loads(response.read())["data"][0]
    assert set(cards["vllm"]) == set(cards["simhost"])
    assert set(cards["vllm"]["permission"][0]) == set(cards["simhost"]["permission"][0])
    assert cards["vllm"]["max_model_len"] == cards["simhost"]["max_model_len"] == MAX_MODEL_LEN


def test_the_real_vllm_bench_reads_both_alike(servers, venv, tiny_model, tmp_path):
    results = {}
    for name, url in servers.items():
        command = [
            str(venv / "bin" / "vllm"),
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            NAME,
            "--tokenizer",
            str(tiny_model),
            "--served-model-name",
            NAME,
            "--dataset-name",
            "random",
            "--random-input-len",
            "64",
            "--random-output-len",
            "16",
            "--ignore-eos",
            "--num-prompts",
            "16",
            "--max-concurrency",
            "4",
            "--seed",
            "5",
            "--temperature",
            "0",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50,90,99",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            str(tmp_path),
            "--result-filename",
            f"{name}.json",
        ]
        started = time.monotonic()
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        results[name] = json.loads((tmp_path / f"{name}.json").read_text())
        results[name]["wall_s"] = time.monotonic() - started
    real, sim = results["vllm"], results["simhost"]
    assert set(real) == set(sim)
    for result in (real, sim):
        assert (result["completed"], result["failed"]) == (16, 0)
        assert result["total_output_tokens"] == 16 * 16
        for metric in ("ttft", "tpot", "itl", "e2el"):
            p50, p90, p99 = (result[f"p{p}_{metric}_ms"] for p in (50, 90, 99))
            assert 0 < p50 <= p90 <= p99, (metric, p50, p90, p99)
    # The client counts prompts with the tokenizer both servers share: the same totals.
    assert real["total_input_tokens"] == sim["total_input_tokens"]
    assert real["input_lens"] == sim["input_lens"] and real["output_lens"] == sim["output_lens"]


def key_paths(value, prefix: str = "") -> set[str]:
    """Every key path of a JSON object ("usage.input_tokens_details.cached_tokens"; a list by
    its first item, as "output[]"), not its values."""
    if isinstance(value, dict):
        found = set()
        for key, item in value.items():
            found |= {f"{prefix}{key}"} | key_paths(item, f"{prefix}{key}.")
        return found
    if isinstance(value, list) and value:
        return key_paths(value[0], prefix.rstrip(".") + "[].")
    return set()


def test_responses_answer_the_same_fields_and_counts(servers):
    body = {"model": NAME, "input": prompts(1, 16, seed=6)[0], "temperature": 0}
    answers = {}
    for name, url in servers.items():
        status, answer = post(url + "/v1/responses", {**body, "max_output_tokens": 4})
        assert status == 200, (name, answer)
        answers[name] = answer
    real, sim = answers["vllm"], answers["simhost"]
    paths = {name: key_paths(answer) for name, answer in answers.items()}
    assert (paths["vllm"] - paths["simhost"], paths["simhost"] - paths["vllm"]) == (set(), set())
    assert sim["usage"]["input_tokens"] == real["usage"]["input_tokens"]  # same template
    assert sim["usage"]["output_tokens"] == real["usage"]["output_tokens"] == 4
    for key in ("object", "status", "incomplete_details", "max_output_tokens", "temperature"):
        assert sim[key] == real[key], key


def response_events(url: str, body: dict) -> list[dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        lines = response.read().decode().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]


def test_streamed_responses_send_the_same_events_with_the_same_fields(servers):
    body = {"model": NAME, "input": prompts(1, 16, seed=7)[0], "temperature": 0}
    body |= {"max_output_tokens": 4, "stream": True}
    seen = {}
    for name, url in servers.items():
        events = response_events(url + "/v1/responses", body)
        assert [e["sequence_number"] for e in events] == list(range(len(events))), name
        # vLLM may put several tokens in one delta on a loaded box: deltas count as one kind
        kinds = [e["type"] for e in events]
        collapsed = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
        fields = {e["type"]: key_paths(e) for e in events}
        final = events[-1]["response"]
        seen[name] = (collapsed, fields, final["usage"]["input_tokens"], final["status"])
    assert seen["simhost"] == seen["vllm"]
