"""simhost's /v1/responses: vLLM 0.32's text subset; a 400 for what it does not emulate."""

from __future__ import annotations

import json
import urllib.request

import pytest

from simhost.server.protocol import ApiError
from simhost.server.responses import parse_responses
from simhost.textgen import render_chat, tokenize
from tests.simhost.server.test_logprobs import server  # noqa: F401 - the module's running simhost
from tests.simhost.server.test_server import post

SERVED = ["sim-1b"]


def test_text_input_and_instructions_become_the_chat_prompt():
    request = parse_responses({"input": "hi", "instructions": "be brief"}, SERVED, 1024)
    expected = render_chat(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    assert request.prompts == [expected] and request.chat and not request.stream
    assert request.max_tokens == 1024  # no max_output_tokens: what the context leaves, as vLLM
    parts = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
    assert parse_responses(parts, SERVED, 1024).prompts == [
        render_chat([{"role": "user", "content": "hi"}])
    ]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi", "tools": [{"type": "function", "name": "f"}]}, "tools"),
        ({"input": "hi", "background": True}, "background"),
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": ""}, "input"),
        ({"input": [{"content": "no role"}]}, "input[0]"),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "hi", "model": "gpt-4"}, "model"),
    ],
)
def test_what_simhost_does_not_emulate_or_accept_is_a_400_naming_the_field(body, param):
    with pytest.raises(ApiError) as caught:
        parse_responses(body, SERVED, 1024)
    assert caught.value.param == param and caught.value.status in (400, 404)


def test_a_response_object_carries_the_text_and_usage(server):  # noqa: F811
    status, answer = post(
        server.url + "/v1/responses", {"input": "what is a kv cache", "max_output_tokens": 5}
    )
    assert status == 200, answer
    assert answer["object"] == "response" and answer["id"].startswith("resp_")
    (message,) = answer["output"]
    (part,) = message["content"]
    assert part["type"] == "output_text" and len(tokenize(part["text"])) == 5
    prompt = render_chat([{"role": "user", "content": "what is a kv cache"}])
    assert answer["usage"]["input_tokens"] == len(tokenize(prompt))
    assert (
        answer["usage"]["output_tokens"] == 5
        and answer["usage"]["total_tokens"] == answer["usage"]["input_tokens"] + 5
    )
    assert answer["status"] == "incomplete" and answer["incomplete_details"] == {
        "reason": "max_output_tokens"
    }


def events_of(raw: str) -> list[tuple[str, dict]]:
    found = []
    for block in raw.strip().split("\n\n"):
        kind, data = block.split("\n")
        found.append((kind.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return found


def test_a_streamed_response_sends_vllms_events_in_order(server):  # noqa: F811
    body = {"input": "what is a kv cache", "max_output_tokens": 3, "stream": True}
    request = urllib.request.Request(
        server.url + "/v1/responses",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        events = events_of(response.read().decode())
    kinds = [kind for kind, _ in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert all(data["type"] == kind for kind, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    text = "".join(data["delta"] for kind, data in events if kind.endswith(".delta"))
    final = events[-1][1]["response"]
    assert final["output"][0]["content"][0]["text"] == text == events[7][1]["text"]
    assert final["usage"]["output_tokens"] == 3 and events[0][1]["response"]["usage"] is None
