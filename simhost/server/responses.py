"""/v1/responses as vLLM 0.32 answers it for text, the minimal subset simhost emulates: `input`
(a string, or messages whose content is a string or `input_text` parts), `instructions`,
`max_output_tokens`, `temperature`, `top_p`, `seed`, `stream`; one message of `output_text`
back, whole or as vLLM's event stream. What simhost does not emulate (tools, background, stored
responses to continue from) is refused with a 400 naming the field.

Pure: JSON-ready data in and out; the generation itself is the chat completion's.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from simhost.server.protocol import ApiError, GenerationRequest, parse_chat

NOT_EMULATED = ("background", "tools", "previous_response_id", "prompt", "reasoning")


def _refuse_not_emulated(body: Dict[str, Any]) -> None:
    for name in NOT_EMULATED:
        if body.get(name) not in (None, False, []):
            raise ApiError(400, "{}: simhost emulates only text responses.".format(name), name)


def _text_of(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        texts = [p for p in parts if isinstance(p, str)]
        if parts and len(texts) == len(parts):
            return "".join(texts)
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
    for name in ("model", "temperature", "top_p", "seed", "stream"):
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


def message_item(item_id: str, text: Optional[str], status: str = "completed") -> Dict[str, Any]:
    """The output message; `text` None while it is in progress (no content part yet)."""
    return {
        "id": item_id,
        "content": [] if not text else [text_part(text, None)],
        "role": "assistant",
        "status": status,
        "type": "message",
        "phase": None,
    }


def text_part(text: str, logprobs: Optional[List[Dict[str, Any]]]) -> Dict[str, Any]:
    return {"annotations": [], "text": text, "type": "output_text", "logprobs": logprobs}


def response_body(
    body: Dict[str, Any],
    generation: GenerationRequest,
    max_tokens: int,
    created: int,
    response_id: str,
    finished: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The response object, with vLLM 0.32's fields and defaults for what was not asked;
    in progress (no output, no usage) unless `finished` has {"item_id", "text", "usage",
    "finish_reason"}."""
    incomplete = bool(finished and finished["finish_reason"] == "length")
    incomplete = incomplete and body.get("max_output_tokens") is not None
    status = "in_progress" if finished is None else "incomplete" if incomplete else "completed"
    return {
        "id": response_id,
        "created_at": created,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata"),
        "model": generation.model,
        "object": "response",
        "output": [] if finished is None else [message_item(finished["item_id"], finished["text"])],
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
        "status": status,
        "text": body.get("text"),
        "top_logprobs": None,
        "truncation": body.get("truncation", "disabled"),
        "usage": None if finished is None else _usage(finished["usage"]),
        "user": body.get("user"),
        # vLLM's own additions, null unless their features are on
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "input_messages": None,
        "output_messages": None,
    }


def opening_events(response: Dict[str, Any], item_id: str) -> List[Dict[str, Any]]:
    """vLLM's events before the first text delta (sequence numbers added when sent)."""
    where = {"output_index": 0, "item_id": item_id, "content_index": 0}
    return [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": message_item(item_id, None, "in_progress"),
        },
        {"type": "response.content_part.added", **where, "part": text_part("", [])},
    ]


def delta_event(item_id: str, delta: str) -> Dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "output_index": 0,
        "item_id": item_id,
        "content_index": 0,
        "delta": delta,
        "logprobs": [],
    }


def closing_events(response: Dict[str, Any], item_id: str, text: str) -> List[Dict[str, Any]]:
    """vLLM's events after the last delta, ending with the finished response."""
    where = {"output_index": 0, "item_id": item_id, "content_index": 0}
    done = {"output_index": 0, "item": message_item(item_id, text)}
    return [
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": text_part(text, None)},
        {"type": "response.output_item.done", **done},
        {"type": "response.completed", "response": response},
    ]


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
