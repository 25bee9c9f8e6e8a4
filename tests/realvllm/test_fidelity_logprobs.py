"""simhost's log probabilities against the real vLLM 0.32 (`make test-vllm`).

Tolerances: the same keys at every level, the same lengths, token strings the shared tokenizer
decodes (and, for the prompt, the very same tokens and offsets); the values are simhost's own
(there is no model) and only checked to be log probabilities; the limit's error text identical.
"""

from __future__ import annotations

import pytest

from simhost.textgen import detokenize, vocab_size
from tests.realvllm.pair import NAME, post, prompts, stream

pytestmark = pytest.mark.slow
CHAT = [{"role": "user", "content": "Which tier holds the KV cache when the GPU is full?"}]


def decoded_tokens() -> set[str]:
    return {detokenize([index]) for index in range(vocab_size())}


def ask_both(servers, path: str, body: dict) -> dict[str, dict]:
    answers = {}
    for name, url in servers.items():
        status, answer = post(url + path, {"model": NAME, **body})
        assert status == 200, (name, answer)
        answers[name] = answer
    return answers


def shape(value):
    """The keys and lengths of a JSON value, not its numbers or strings."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list) and value and all(isinstance(i, (dict, list)) for i in value):
        return [shape(item) for item in value]
    if isinstance(value, list):  # bytes of a token: their count depends on the token
        return "list"
    return type(value).__name__ if value is not None else None


def test_completion_logprobs_have_the_same_shape(servers):
    body = {"prompt": prompts(1, 24, seed=11)[0], "max_tokens": 6, "ignore_eos": True}
    answers = ask_both(servers, "/v1/completions", {**body, "temperature": 0, "logprobs": 3})
    known = decoded_tokens()
    seen, sizes = {}, {}
    for name, answer in answers.items():
        choice = answer["choices"][0]
        logprobs = choice["logprobs"]
        assert "".join(logprobs["tokens"]) == choice["text"], name
        # vLLM's detokenizer holds back a token of partial UTF-8 bytes as "" (a random-weight
        # model samples such byte tokens); simhost generates whole words only
        assert set(logprobs["tokens"]) <= known | {""}, name
        assert all(value <= 0 for value in logprobs["token_logprobs"]), name
        assert all(set(top) <= known | {""} for top in logprobs["top_logprobs"]), name
        seen[name] = (sorted(logprobs), [len(v) for v in logprobs.values()])
        sizes[name] = [len(top) for top in logprobs["top_logprobs"]]
    assert seen["vllm"] == seen["simhost"]
    # Greedy: the sampled token is the best, so the dict holds the top 3; on vLLM candidates
    # whose text decodes alike ("" for partial bytes) share one key, so it may hold fewer.
    assert sizes["simhost"] == [3] * 6
    assert all(1 <= size <= 3 for size in sizes["vllm"]), sizes["vllm"]


def test_echo_with_logprobs_gives_the_same_prompt_tokens_and_offsets(servers):
    prompt = prompts(1, 16, seed=12)[0]
    body = {"prompt": prompt, "max_tokens": 3, "echo": True, "logprobs": 1, "ignore_eos": True}
    answers = ask_both(servers, "/v1/completions", {**body, "temperature": 0})
    views = {}
    for name, answer in answers.items():
        choice = answer["choices"][0]
        logprobs = choice["logprobs"]
        assert choice["text"].startswith(prompt), name
        assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
        prompt_len = len(logprobs["tokens"]) - 3
        views[name] = (
            logprobs["tokens"][:prompt_len],
            logprobs["text_offset"][:prompt_len],
            shape(choice["prompt_logprobs"][:1]),
            len(choice["prompt_logprobs"]),
        )
    assert views["vllm"] == views["simhost"]


def test_prompt_logprobs_have_the_same_shape_and_token_ids(servers):
    body = {"prompt": prompts(1, 12, seed=13)[0], "max_tokens": 1, "prompt_logprobs": 2}
    answers = ask_both(servers, "/v1/completions", body)
    found = {}
    for name, answer in answers.items():
        positions = answer["choices"][0]["prompt_logprobs"]
        assert positions[0] is None, name
        entries = [entry for position in positions[1:] for entry in position.values()]
        assert all(set(entry) == {"logprob", "rank", "decoded_token"} for entry in entries)
        # the prompt's own token is each position's first key, as vLLM orders them
        found[name] = [next(iter(position)) for position in positions[1:]]
    assert found["vllm"] == found["simhost"]


def test_chat_logprobs_have_the_same_shape(servers):
    body = {"messages": CHAT, "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    answers = ask_both(
        servers, "/v1/chat/completions", {**body, "logprobs": True, "top_logprobs": 2}
    )
    known = decoded_tokens()
    shapes = {}
    for name, answer in answers.items():
        choice = answer["choices"][0]
        content = choice["logprobs"]["content"]
        assert "".join(entry["token"] for entry in content) == choice["message"]["content"]
        assert {entry["token"] for entry in content} <= known | {""}, name
        assert answer["usage"]["prompt_tokens"] > 0
        shapes[name] = (shape(choice["logprobs"]), "prompt_logprobs" in answer)
    assert shapes["vllm"] == shapes["simhost"]
    prompt_tokens = {name: a["usage"]["prompt_tokens"] for name, a in answers.items()}
    assert prompt_tokens["vllm"] == prompt_tokens["simhost"]  # the same chat template


def test_streamed_logprobs_cover_every_token(servers):
    body = {
        "model": NAME,
        "prompt": prompts(1, 16, seed=14)[0],
        "max_tokens": 5,
        "ignore_eos": True,
        "stream": True,
        "logprobs": 2,
    }
    counted = {}
    for name, url in servers.items():
        chunks = [c for c in stream(url + "/v1/completions", body) if c["choices"]]
        logprobs = [c["choices"][0]["logprobs"] for c in chunks]
        tokens = [t for lp in logprobs if lp for t in lp["tokens"]]
        assert "".join(tokens) == "".join(c["choices"][0]["text"] for c in chunks), name
        counted[name] = (len(tokens), sorted(logprobs[0]))
    assert counted["vllm"] == counted["simhost"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": "kv cache", "logprobs": 21}),
        ("/v1/completions", {"prompt": "kv cache", "prompt_logprobs": 30}),
        ("/v1/chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": 25}),
    ],
)
def test_both_refuse_too_many_logprobs_with_the_same_words(servers, path, body):
    answers = {
        name: post(url + path, {"model": NAME, "max_tokens": 2, **body})
        for name, url in servers.items()
    }
    (status, real), (sim_status, sim) = answers["vllm"], answers["simhost"]
    assert status == sim_status == 400
    assert sim["error"]["message"] == real["error"]["message"]
    assert sim["error"]["param"] == real["error"]["param"]
