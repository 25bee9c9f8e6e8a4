from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost.server.protocol import (
    DEFAULT_MAX_TOKENS,
    ApiError,
    check_context,
    parse_chat,
    parse_completion,
    parse_json_body,
)

SERVED = ["sim-1b"]


def test_a_minimal_completion_request_gets_the_openai_defaults():
    request = parse_completion({"prompt": "hi"}, SERVED)
    assert request.model == "sim-1b"
    assert request.max_tokens == DEFAULT_MAX_TOKENS
    assert request.temperature == 1.0
    assert not request.stream and not request.include_usage


def test_stream_options_ask_for_a_usage_chunk():
    body = {"prompt": "hi", "stream": True, "stream_options": {"include_usage": True}}
    assert parse_completion(body, SERVED).include_usage


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"prompt": "hi", "model": "gpt-4"}, 404, "model"),
        ({"prompt": "hi", "max_tokens": -3}, 400, "max_tokens"),
        ({"prompt": "hi", "max_tokens": 0}, 400, "max_tokens"),
        ({"prompt": "hi", "max_tokens": "10"}, 400, "max_tokens"),
        ({"prompt": "hi", "temperature": 5}, 400, "temperature"),
        ({"prompt": "hi", "temperature": True}, 400, "temperature"),
        ({"prompt": 12}, 400, "prompt"),
        ({"prompt": []}, 400, "prompt"),
        ({}, 400, "prompt"),
        ({"prompt": "hi", "n": 0}, 400, "n"),
        ({"prompt": "hi", "logprobs": 21}, 400, "logprobs"),
        ({"prompt": "hi", "stream": "yes"}, 400, "stream"),
        ({"prompt": "hi", "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ],
)
def test_bad_completion_fields_are_refused_with_the_field_named(body, status, param):
    with pytest.raises(ApiError) as caught:
        parse_completion(body, SERVED)
    assert caught.value.status == status
    assert caught.value.param == param
    error = caught.value.body()["error"]
    assert error["code"] == status and error["message"]


def test_malformed_json_is_a_400_not_a_crash():
    with pytest.raises(ApiError) as caught:
        parse_json_body(b'{"prompt": ')
    assert caught.value.status == 400
    assert caught.value.body()["error"]["type"] == "BadRequestError"


def test_a_json_body_that_is_not_an_object_is_refused():
    with pytest.raises(ApiError):
        parse_json_body(b"[1, 2]")


def test_token_id_prompts_are_kept_as_the_ids_sent():
    request = parse_completion({"prompt": [5, 6, 7]}, SERVED)
    assert request.prompts == [[5, 6, 7]]


def test_tools_without_a_tool_parser_are_refused_as_vllm_does():
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tool_choice": "auto",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    }
    with pytest.raises(ApiError) as caught:
        parse_chat(body, SERVED)
    assert caught.value.message == (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )


def test_stream_options_ask_for_usage_in_every_chunk():
    body = {
        "prompt": "hi",
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    request = parse_completion(body, SERVED)
    assert request.include_usage and request.continuous_usage


def test_chat_messages_accept_text_parts_and_max_completion_tokens():
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "max_completion_tokens": 9,
    }
    request = parse_chat(body, SERVED)
    assert request.chat and request.max_tokens == 9
    assert "<|user|> hello" in request.prompts[0]


@pytest.mark.parametrize(
    "messages", [None, [], ["hi"], [{"content": "no role"}], [{"role": "user", "content": 3}]]
)
def test_bad_chat_messages_are_a_400(messages):
    with pytest.raises(ApiError) as caught:
        parse_chat({"messages": messages}, SERVED)
    assert caught.value.status == 400


def test_a_prompt_over_the_context_limit_is_refused_with_vllm_0_32s_words():
    with pytest.raises(ApiError) as caught:
        check_context(prompt_tokens=1100, max_tokens=10, max_model_len=1024)
    assert caught.value.status == 400 and caught.value.param == "input_tokens"
    # The text a real vLLM 0.32 answered for a 1100-token text prompt at max_model_len 1024.
    assert caught.value.message == (
        "This model's maximum context length is 1024 tokens. However, your prompt contains at "
        "least 1025 input tokens, which exceeds this limit even without any output tokens. "
        "Please reduce the length of the input prompt. (parameter=input_tokens, value=1025)"
    )


def test_max_tokens_beyond_the_context_is_clamped_not_refused():
    assert check_context(prompt_tokens=4000, max_tokens=200, max_model_len=4096) == 96


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children)
    ),
    max_leaves=8,
)
fields = st.sampled_from(
    [
        "prompt",
        "model",
        "max_tokens",
        "temperature",
        "stream",
        "stream_options",
        "n",
        "seed",
        "logprobs",
        "prompt_logprobs",
        "echo",
    ]
)


@given(st.dictionaries(fields, json_values))
def test_any_completion_body_either_parses_or_raises_an_api_error(body):
    try:
        request = parse_completion(body, SERVED)
    except ApiError as error:
        assert error.status in (400, 404)
        json.dumps(error.body())
    else:
        assert request.max_tokens >= 1
        assert all(isinstance(p, str) for p in request.prompts)


@given(st.binary(max_size=40))
def test_any_bytes_either_parse_as_an_object_or_raise_an_api_error(raw):
    try:
        assert isinstance(parse_json_body(raw), dict)
    except ApiError as error:
        assert error.status == 400
