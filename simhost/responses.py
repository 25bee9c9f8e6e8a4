"""/v1/responses as vLLM 0.32 answers it for text, the minimal subset simhost emulates: `input`
(a string, or messages whose content is a string or `input_text` parts), `instructions`,
`max_output_tokens`, `temperature`, `top_p`, `seed`; one message of `output_text` back, not
streamed. What simhost does not emulate (streaming, tools, background, stored responses to
continue from) is refused with a 400 naming the field.

Pure: JSON-ready data in and out; the generation itself is the chat completion's.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional, Sequence

from simhost.protocol import ApiError, GenerationRequest, parse_chat

NOT_EMULATED = ("stream", "background", "tools", "previous_response_id", "prompt", "reasoning")


def _refuse_not_emulated(body: Dict[str, Any]) -> None:
    for name in NOT_EMULATED:
        if body.get(name) not in (None, False, []):
            raise ApiError(
                400, "{}: simhost emulates only non-streamed text responses.".format(name), name
            )


def _text_of(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        if parts and all(isinstance(p, str) for p in parts):
            return "".join(parts)
    raise ApiError(400, "{}.content must be a string or input_text parts.".format(param), param)


def _messages(body: Dict[str, Any]) -> List[Dict[str, str]]:
    value = body.get("input")
    messages = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    if isinstance(value, str) and value:
        return [*messages, {"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise ApiError(400, "input must be a string or a non-empty list of messages.", "input")
    for index, item in enumerate(value):
        param = "input[{}]".format(index)
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise ApiError(400, "{} must be a message with a string role.".format(param), param)
        messages.append({"role": item["role"], "content": _text_of(item.get("content"), param)})
    return messages


def parse_responses(
    body: Dict[str, Any], served: Sequence[str], max_model_len: int
) -> GenerationRequest:
    """The chat generation a /v1/responses request asks for. As in vLLM, no
    `max_output_tokens` means whatever the context leaves (check_context clamps it)."""
    _refuse_not_emulated(body)
    chat: Dict[str, Any] = {"messages": _messages(body), "max_tokens": max_model_len}
    for name in ("model", "temperature", "top_p", "seed"):
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    try:
        return parse_chat(chat, served)
    except ApiError as error:
        if error.param == "max_tokens":
            raise ApiError(
                400, error.message.replace("max_tokens", "max_output_tokens"), "max_output_tokens"
            ) from None
        raise


def response_body(
    body: Dict[str, Any],
    generation: GenerationRequest,
    text: str,
    usage: Dict[str, int],
    max_tokens: int,
    created: int,
    finish_reason: Optional[str],
) -> Dict[str, Any]:
    """The response object, with vLLM 0.32's fields and defaults for what was not asked."""
    message = {
        "id": "msg_" + uuid.uuid4().hex,
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": None}]
        if text
        else [],
        "role": "assistant",
        "status": "completed",
        "type": "message",
        "phase": None,
    }
    incomplete = finish_reason == "length" and body.get("max_output_tokens") is not None
    return {
        "id": "resp_" + uuid.uuid4().hex,
        "created_at": created,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata"),
        "model": generation.model,
        "object": "response",
        "output": [message],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": generation.temperature,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [],
        "top_p": body.get("top_p", 1.0),
        "background": False,
        "max_output_tokens": max_tokens,
        "max_tool_calls": body.get("max_tool_calls"),
        "previous_response_id": None,
        "prompt": None,
        "reasoning": None,
        "service_tier": body.get("service_tier", "auto"),
        "status": "incomplete" if incomplete else "completed",
        "text": body.get("text"),
        "top_logprobs": None,
        "truncation": body.get("truncation", "disabled"),
        "usage": _usage(usage),
        "user": body.get("user"),
        # vLLM's own additions, null unless their features are on
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "input_messages": None,
        "output_messages": None,
    }


def _usage(usage: Dict[str, int]) -> Dict[str, Any]:
    """vLLM's usage of a one-turn text response: no cache or tool details, no per-turn lists
    (vLLM fills those for multi-turn tool contexts only)."""
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {
            "cached_tokens": 0,
            "cache_write_tokens": 0,
            "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        },
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {
            "reasoning_tokens": 0,
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": usage["total_tokens"],
    }
