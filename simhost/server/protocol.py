"""The OpenAI-compatible wire format: request validation and response/SSE chunk building.

Pure: JSON-ready data in and out, errors as ApiError carrying the HTTP status and the OpenAI
error body. No I/O; standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from simhost.server.logprobs import LogprobError, check_limit, checked_count
from simhost.textgen import render_chat

DEFAULT_MAX_TOKENS = 16
DONE_EVENT = b"data: [DONE]\n\n"


class ApiError(Exception):
    """An error answered as OpenAI-style JSON: {"error": {message, type, param, code}}."""

    def __init__(self, status: int, message: str, param: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    @property
    def error_type(self) -> str:
        return {
            400: "BadRequestError",
            404: "NotFoundError",
            500: "InternalServerError",
        }.get(self.status, "Error")

    def body(self) -> Dict[str, Any]:
        error: Dict[str, Union[str, int, None]] = {
            "message": self.message,
            "type": self.error_type,
            "param": self.param,
        }
        error["code"] = self.status
        return {"error": error}


@dataclass(frozen=True)
class GenerationRequest:
    """A validated /v1/completions or /v1/chat/completions request."""

    chat: bool
    model: str
    prompts: List[Union[str, List[int]]]  # text, or token ids as the client sent them
    max_tokens: int
    temperature: float
    seed: Optional[int]
    stream: bool
    include_usage: bool
    continuous_usage: bool = False
    n: int = 1
    echo: bool = False
    logprobs: Optional[int] = None  # top-N per generated token; None: not asked
    prompt_logprobs: Optional[int] = None  # top-N per prompt token; None: not asked


def parse_json_body(raw: bytes) -> Dict[str, Any]:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ApiError(400, "Invalid JSON in request body: {}".format(error)) from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def _number(body: Dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, "{} must be a number.".format(name), name)
    if not low <= value <= high:
        raise ApiError(400, "{} must be in [{}, {}], got {}.".format(name, low, high, value), name)
    return float(value)


def _optional_int(body: Dict[str, Any], name: str) -> Optional[int]:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, "{} must be an integer.".format(name), name)
    return value


def _max_tokens(body: Dict[str, Any], names: Sequence[str]) -> int:
    for name in names:
        value = _optional_int(body, name)
        if value is None:
            continue
        if value < 1:
            raise ApiError(400, "{} must be at least 1, got {}.".format(name, value), name)
        return value
    return DEFAULT_MAX_TOKENS


def _bool(body: Dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, "{} must be a boolean.".format(name), name)
    return value


def _stream_options(body: Dict[str, Any], stream: bool) -> Dict[str, Any]:
    options = body.get("stream_options")
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object.", "stream_options")
    if not stream:
        raise ApiError(400, "stream_options is only allowed when stream is true.", "stream_options")
    return options


def _model(body: Dict[str, Any], served: Sequence[str]) -> str:
    model = body.get("model")
    if model is None:
        return served[0]
    if not isinstance(model, str):
        raise ApiError(400, "model must be a string.", "model")
    if model not in served:
        raise ApiError(404, "The model `{}` does not exist.".format(model), "model")
    return model


def _prompts(value: Any) -> List[Union[str, List[int]]]:
    """A string, a list of strings, a list of token ids, or a list of token id lists."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        if all(isinstance(item, str) for item in value):
            return list(value)
        if all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            return [list(value)]
        if all(isinstance(item, list) and item for item in value):
            return [p for item in value for p in _prompts(item)]
    raise ApiError(
        400, "prompt must be a string, a list of strings or a list of token ids.", "prompt"
    )


def _common(
    body: Dict[str, Any],
    served: Sequence[str],
    chat: bool,
    prompts: List[Union[str, List[int]]],
) -> GenerationRequest:
    stream = _bool(body, "stream")
    n = _optional_int(body, "n")
    n = 1 if n is None else n
    if n < 1:
        raise ApiError(400, "n must be at least 1.", "n")
    _refuse_unsupported(body)
    options = _stream_options(body, stream)
    echo = False if chat else _bool(body, "echo")
    try:
        logprobs, prompt_logprobs = _logprob_counts(body, chat, stream, echo)
    except LogprobError as error:
        raise ApiError(400, str(error), error.param) from None
    return GenerationRequest(
        chat=chat,
        model=_model(body, served),
        prompts=prompts,
        max_tokens=_max_tokens(
            body, ("max_completion_tokens", "max_tokens") if chat else ("max_tokens",)
        ),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        seed=_optional_int(body, "seed"),
        stream=stream,
        include_usage=_bool(options, "include_usage"),
        continuous_usage=_bool(options, "continuous_usage_stats"),
        n=n,
        echo=echo,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
    )


def _logprob_counts(
    body: Dict[str, Any], chat: bool, stream: bool, echo: bool
) -> Tuple[Optional[int], Optional[int]]:
    """(logprobs, prompt_logprobs) as vLLM 0.32 reads them: completions' integer `logprobs`;
    chat's `logprobs: true` with `top_logprobs` (0 by default); `prompt_logprobs`, or with
    completions' `echo` the `logprobs` count; then the --max-logprobs limit."""
    prompt = checked_count(body.get("prompt_logprobs"), "prompt_logprobs")
    if stream and prompt is not None and prompt != 0:
        raise LogprobError(
            "`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs"
        )
    if chat:
        top = checked_count(body.get("top_logprobs"), "top_logprobs")
        if top not in (None, 0) and not body.get("logprobs"):
            raise LogprobError(
                "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs"
            )
        sample = (top or 0) if _bool(body, "logprobs") else None
    else:
        sample = checked_count(body.get("logprobs"), "logprobs")
    if prompt is None and echo:
        prompt = sample
    check_limit(sample, "sample")
    check_limit(prompt, "prompt")
    return sample, prompt


def _refuse_unsupported(body: Dict[str, Any]) -> None:
    """What vLLM refuses when served without tool parsing."""
    if body.get("tool_choice") == "auto" or (body.get("tools") and "tool_choice" not in body):
        raise ApiError(
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
            "to be set",
            None,
        )


def parse_completion(body: Dict[str, Any], served: Sequence[str]) -> GenerationRequest:
    if "prompt" not in body:
        raise ApiError(400, "prompt is required.", "prompt")
    return _common(body, served, False, _prompts(body["prompt"]))


def _message_text(message: Any, index: int) -> Dict[str, str]:
    param = "messages[{}]".format(index)
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise ApiError(400, "{} must be an object with a string role.".format(param), param)
    content = message.get("content")
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = " ".join(p for p in parts if isinstance(p, str))
    if not isinstance(content, str):
        raise ApiError(400, "{}.content must be a string or text parts.".format(param), param)
    return {"role": message["role"], "content": content}


def parse_chat(body: Dict[str, Any], served: Sequence[str]) -> GenerationRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list.", "messages")
    rendered = render_chat([_message_text(m, i) for i, m in enumerate(messages)])
    return _common(body, served, True, [rendered])


def tokenize_text(body: Dict[str, Any], served: Sequence[str]) -> str:
    """The text /tokenize counts: `prompt`, or `messages` through the chat template."""
    _model(body, served)
    if "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list.", "messages")
        return render_chat([_message_text(m, i) for i, m in enumerate(messages)])
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be a string.", "prompt")
    return prompt


def token_ids(body: Dict[str, Any], vocab_size: int) -> List[int]:
    """/detokenize's `tokens`: ids inside the vocabulary."""
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab_size for t in tokens
    ):
        raise ApiError(
            400, "tokens must be a list of token ids below {}.".format(vocab_size), "tokens"
        )
    return tokens


def check_context(
    prompt_tokens: int, max_tokens: int, max_model_len: int, *, from_text: bool = True
) -> int:
    """The max_tokens the request gets, as vLLM 0.32 decides: a prompt longer than the context
    is refused (a text prompt is cut at max_model_len + 1 by the tokenizer, hence "at least"),
    and max_tokens is clamped to what the context leaves."""
    if prompt_tokens == 0:
        raise ApiError(400, "The prompt is empty.", "prompt")
    if prompt_tokens > max_model_len:
        count = max_model_len + 1 if from_text else prompt_tokens
        qualifier = "at least " if from_text else ""
        raise ApiError(
            400,
            "This model's maximum context length is {} tokens. However, your prompt contains "
            "{}{} input tokens, which exceeds this limit even without any output tokens. "
            "Please reduce the length of the input prompt. (parameter=input_tokens, "
            "value={})".format(max_model_len, qualifier, count, count),
            "input_tokens",
        )
    return min(max_tokens, max_model_len - prompt_tokens)


def usage(prompt_tokens: int, completion_tokens: int) -> Dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


def sse(payload: Dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def completion_choice(
    index: int, text: str, finish: Optional[str], logprobs: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    return {
        "index": index,
        "text": text,
        "logprobs": logprobs,
        "finish_reason": finish,
        "stop_reason": None,
    }


def chat_choice(
    index: int,
    delta: Dict[str, str],
    finish: Optional[str],
    stream: bool,
    logprobs: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    key = "delta" if stream else "message"
    return {"index": index, key: delta, "logprobs": logprobs, "finish_reason": finish}


def envelope(
    request_id: str, created: int, model: str, chat: bool, stream: bool, choices: List[Any]
) -> Dict[str, Any]:
    kind = ("chat.completion.chunk" if stream else "chat.completion") if chat else "text_completion"
    return {
        "id": request_id,
        "object": kind,
        "created": created,
        "model": model,
        "choices": choices,
    }
