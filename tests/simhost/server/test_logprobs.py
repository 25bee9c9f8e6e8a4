"""simhost's log probabilities: vLLM 0.32's request checks and response shapes, deterministic
values. Pure functions first, then a real `simhost serve` driven by urllib and the openai client."""

from __future__ import annotations

import json
import math
import urllib.request

import openai
import pytest

from simhost.server.logprobs import MAX_LOGPROBS, output_positions, prompt_positions, word_id
from simhost.server.protocol import ApiError, parse_chat, parse_completion
from simhost.textgen import tokenize, vocab
from tests.simhost.conftest import start_server
from tests.simhost.server.test_server import post

SERVED = ["sim-1b"]
CHAT = [{"role": "user", "content": "what is a kv cache"}]


def test_completions_read_an_integer_and_echo_asks_for_prompt_logprobs():
    request = parse_completion({"prompt": "hi", "logprobs": 3, "echo": True}, SERVED)
    assert (request.logprobs, request.prompt_logprobs) == (3, 3)
    assert parse_completion({"prompt": "hi"}, SERVED).logprobs is None


def test_chat_reads_logprobs_true_with_top_logprobs():
    body = {"messages": CHAT, "logprobs": True, "top_logprobs": 4}
    assert parse_chat(body, SERVED).logprobs == 4
    assert parse_chat({"messages": CHAT, "logprobs": True}, SERVED).logprobs == 0
    assert parse_chat({"messages": CHAT, "logprobs": False}, SERVED).logprobs is None


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"prompt": "hi", "logprobs": 21}, "logprobs", "sample logprobs of 21, which is greater"),
        ({"prompt": "hi", "logprobs": -1}, "logprobs", "sample logprobs of 2048"),
        ({"prompt": "hi", "logprobs": -2}, "logprobs", "must be a positive value or -1"),
        ({"prompt": "hi", "logprobs": "3"}, "logprobs", "must be an integer"),
        ({"prompt": "hi", "prompt_logprobs": 25}, "prompt_logprobs", "prompt logprobs of 25"),
        (
            {"prompt": "hi", "prompt_logprobs": 1, "stream": True},
            "prompt_logprobs",
            "not available when `stream=True`",
        ),
    ],
)
def test_completion_logprob_limits_are_vllms(body, param, words):
    with pytest.raises(ApiError) as caught:
        parse_completion(body, SERVED)
    assert caught.value.status == 400 and caught.value.param == param
    assert words in caught.value.message and f"(parameter={param}" in caught.value.message


def test_chat_top_logprobs_need_logprobs_and_the_limit_names_logprobs():
    with pytest.raises(ApiError) as caught:
        parse_chat({"messages": CHAT, "top_logprobs": 2}, SERVED)
    assert "`logprobs` must be set to true" in caught.value.message
    with pytest.raises(ApiError) as caught:
        parse_chat({"messages": CHAT, "logprobs": True, "top_logprobs": 30}, SERVED)
    assert caught.value.param == "logprobs"
    assert caught.value.message == (
        f"Requested sample logprobs of 30, which is greater than max allowed: {MAX_LOGPROBS} "
        "(parameter=logprobs, value=30)"
    )


def test_positions_are_deterministic_descending_and_greedy_is_rank_one():
    ids = [word_id(w) for w in vocab()[:8]]
    first = output_positions(7, 0, ids, 5, greedy=True)
    assert first == output_positions(7, 0, ids, 5, greedy=True)
    assert first != output_positions(8, 0, ids, 5, greedy=True)
    for token_id, candidates in zip(ids, first, strict=True):
        assert candidates[0].token_id == token_id and candidates[0].rank == 1
        values = [c.logprob for c in candidates]
        assert values == sorted(values, reverse=True) and all(v < 0 for v in values)
        assert len(candidates) == 5 and len({c.token_id for c in candidates}) == 5
    sampled = output_positions(7, 0, ids * 4, 2, greedy=False)
    assert any(c[0].rank > 1 for c in sampled)  # sampling sometimes takes a worse token
    assert all(len(c) in (2, 3) for c in sampled)  # the sampled one, then ranks 1..2


def test_the_prompts_first_token_has_no_logprob():
    positions = prompt_positions(3, tokenize("a kv cache holds keys"), 1)
    assert positions[0] is None and all(p is not None for p in positions[1:])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve"), "--time-scale", "0.05")
    yield running
    running.stop()


def test_completion_logprobs_have_vllms_shape(server):
    body = {"prompt": "tell me about kv caches", "max_tokens": 5, "temperature": 0, "logprobs": 3}
    status, answer = post(server.url + "/v1/completions", body)
    assert status == 200, answer
    choice = answer["choices"][0]
    logprobs = choice["logprobs"]
    assert set(logprobs) == {"text_offset", "token_logprobs", "tokens", "top_logprobs"}
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert logprobs["text_offset"][0] == 0 and len(logprobs["top_logprobs"]) == 5
    for token, value, top in zip(
        logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True
    ):
        assert top[token] == value and len(top) == 3  # greedy: the token is the best of three
    assert post(server.url + "/v1/completions", body)[1]["choices"][0]["logprobs"] == logprobs


def test_echo_puts_the_prompts_tokens_first_with_none_for_the_first(server):
    prompt = "tell me about kv caches"
    body = {"prompt": prompt, "max_tokens": 2, "logprobs": 1, "echo": True, "temperature": 0}
    status, answer = post(server.url + "/v1/completions", body)
    assert status == 200, answer
    choice = answer["choices"][0]
    prompt_len = len(tokenize(prompt))
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == prompt_len + 2
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert [choice["text"][o:] for o in logprobs["text_offset"][:1]] == [choice["text"]]
    assert choice["prompt_logprobs"][0] is None and len(choice["prompt_logprobs"]) == prompt_len
    entry = next(iter(choice["prompt_logprobs"][1].values()))
    assert set(entry) == {"logprob", "rank", "decoded_token"}


def test_chat_logprobs_stream_and_whole_answer_alike(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    ask = {"model": "sim-1b", "messages": CHAT, "max_tokens": 4, "temperature": 0}
    whole = client.chat.completions.create(**ask, logprobs=True, top_logprobs=2)
    content = whole.choices[0].logprobs.content
    assert "".join(c.token for c in content) == whole.choices[0].message.content
    for entry in content:
        assert entry.bytes == list(entry.token.encode())
        assert len(entry.top_logprobs) == 2 and entry.top_logprobs[0].token == entry.token
        assert math.exp(entry.logprob) <= 1
    streamed = client.chat.completions.create(**ask, logprobs=True, top_logprobs=2, stream=True)
    pieces = [
        e
        for chunk in streamed
        if chunk.choices and chunk.choices[0].logprobs
        for e in chunk.choices[0].logprobs.content
    ]
    assert [(e.token, e.logprob) for e in pieces] == [(e.token, e.logprob) for e in content]


def test_streamed_completion_logprobs_offsets_run_on_from_the_echo(server):
    prompt = "tell me about kv caches"
    body = {"prompt": prompt, "max_tokens": 3, "logprobs": 0, "echo": True, "stream": True}
    request = urllib.request.Request(
        server.url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        lines = response.read().decode().splitlines()
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    assert len(choices) == 3 and choices[0]["text"].startswith(prompt)  # echo rides the first
    offsets = [o for c in choices for o in c["logprobs"]["text_offset"]]
    tokens = [t for c in choices for t in c["logprobs"]["tokens"]]
    text = "".join(c["text"] for c in choices)
    assert [text[o : o + len(t)] for o, t in zip(offsets, tokens, strict=True)] == tokens
    assert len(tokens) == len(tokenize(prompt)) + 3
