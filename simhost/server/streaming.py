"""Writing generated words to the client: SSE streams (`data: ...` events then `data: [DONE]`)
and whole JSON responses, for both completions and chat completions.

Imports aiohttp's response types; holds no server state of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Dict, List, Optional

from aiohttp import web

from simhost.server.logprobs import (
    chat_logprobs,
    completion_logprobs,
    output_positions,
    prompt_logprobs_field,
    prompt_positions,
    word_id,
)
from simhost.server.protocol import (
    DONE_EVENT,
    GenerationRequest,
    chat_choice,
    completion_choice,
    envelope,
    sse,
    usage,
)
from simhost.server.responses import closing_events, delta_event, opening_events, response_body
from simhost.server.runtime import LiveRequest

TIMING_HEADER = "X-Simhost-Timing"


def choice_logprobs(
    generation: GenerationRequest, live: LiveRequest, words: List[str], start: int, offset: int
) -> Optional[Dict[str, Any]]:
    """The `logprobs` of the generated words `start`, `start + 1`, ... of one sequence (None
    when not asked); completions with `echo` put the prompt's tokens first (`start` 0)."""
    top = generation.logprobs
    if top is None:
        return None
    ids = [word_id(word) for word in words]
    positions = output_positions(live.output.salt, start, ids, top, generation.temperature == 0)
    if generation.chat:
        return chat_logprobs(positions, top)
    if generation.echo and start == 0:
        prompt_top = generation.prompt_logprobs
        assert prompt_top is not None  # with echo, the parser defaults it to `logprobs`
        echoed = prompt_positions(live.prompt_salt, live.prompt_ids, prompt_top)
        echoed.extend(positions)  # the prompt's tokens, then the generated ones
        return completion_logprobs(live.prompt_ids + ids, echoed, top, offset)
    return completion_logprobs(ids, positions, top, offset)


def prompt_logprobs(
    generation: GenerationRequest, live: LiveRequest
) -> Optional[List[Optional[Dict[str, Any]]]]:
    """`prompt_logprobs` of a whole answer: per prompt token, when asked (or with echo)."""
    if generation.prompt_logprobs is None:
        return None
    top = generation.prompt_logprobs
    return prompt_logprobs_field(prompt_positions(live.prompt_salt, live.prompt_ids, top))


class _Stream:
    """Chunk builder for one streamed answer. The JSON around the text is built once, so a
    token costs one small string encode (this is the server's hot path at high concurrency)."""

    def __init__(self, generation: GenerationRequest, live: LiveRequest) -> None:
        self.generation = generation
        self.live = live
        prefix = "chatcmpl-" if generation.chat else "cmpl-"
        self.request_id = prefix + uuid.uuid4().hex
        self.created = int(time.time())
        self.started = False
        self.offset = 0  # completions' text_offset of the next token
        probe = "\u0000TEXT\u0000"
        self._head, self._tail = self._template(probe, None).split(json.dumps(probe).encode())

    def _template(self, text: str, finish: Optional[str]) -> bytes:
        return self._event([self._choice(text, finish)])

    def _event(self, choices: List[Any], extra: Optional[Dict[str, Any]] = None) -> bytes:
        payload = envelope(
            self.request_id,
            self.created,
            self.generation.model,
            self.generation.chat,
            True,
            choices,
        )
        if extra:
            payload.update(extra)
        return sse(payload)

    def _choice(
        self, text: str, finish: Optional[str], logprobs: Optional[Dict[str, Any]] = None
    ) -> Dict[str, Any]:
        if self.generation.chat:
            return chat_choice(0, {"content": text}, finish, True, logprobs)
        return completion_choice(0, text, finish, logprobs)

    def words(self, words: List[str]) -> bytes:
        """One chunk per token (each word is one token and carries its leading space)."""
        if self.generation.continuous_usage or self.generation.logprobs is not None:
            return self._words_one_by_one(words)
        parts = self._opening()
        texts = self._texts(words)
        head, tail = self._head, self._tail
        last = len(words) - 1
        for index, text in enumerate(texts):
            if self.live.done and index == last:
                parts.append(self._template(text, self.live.finish_reason))
            else:
                parts.append(head + json.dumps(text).encode() + tail)
        return b"".join(parts)

    def _opening(self) -> List[bytes]:
        parts = []
        if not self.started and self.generation.chat:
            delta = {"role": "assistant", "content": ""}
            parts.append(self._event([chat_choice(0, delta, None, True)]))
        return parts

    def _texts(self, words: List[str]) -> List[str]:
        """The chunks' texts: as vLLM, `echo` sends the prompt with the first token."""
        texts = list(words)
        if not self.started and self.live.echo and texts:
            texts[0] = self.live.echo + texts[0]
        self.started = True
        return texts

    def _words_one_by_one(self, words: List[str]) -> bytes:
        """The slow path, one full encode per token: `stream_options.continuous_usage_stats`
        (usage so far in every chunk, as vLLM does; GuideLLM asks for it) or `logprobs`."""
        parts = self._opening()
        prompt = self.live.engine_request.prompt_len
        sent = self.live.generated - len(words)
        last = len(words) - 1
        for index, (word, text) in enumerate(zip(words, self._texts(words))):  # noqa: B905
            finish = self.live.finish_reason if self.live.done and index == last else None
            logprobs = choice_logprobs(
                self.generation, self.live, [word], sent + index, self.offset
            )
            if logprobs is not None and not self.generation.chat:
                self.offset = logprobs["text_offset"][-1] + len(logprobs["tokens"][-1])
            extra = (
                {"usage": usage(prompt, sent + index + 1)}
                if self.generation.continuous_usage
                else None
            )
            parts.append(self._event([self._choice(text, finish, logprobs)], extra))
        return b"".join(parts)

    def closing(self, timing: Optional[Dict[str, Any]]) -> bytes:
        parts = []
        if self.generation.include_usage:
            counts = usage(self.live.engine_request.prompt_len, self.live.generated)
            parts.append(self._event([], {"usage": counts}))
        if timing is not None:
            parts.append(self._event([], {"simhost": timing}))
        parts.append(DONE_EVENT)
        return b"".join(parts)


def _timing(live: LiveRequest, received: float, first_sent: float) -> Dict[str, Any]:
    """Server-side view of one request, for the bench client's overhead figure: from the kernel
    receiving the request to the first token's bytes handed to the socket; `handler_s` is when
    its handler started. All CLOCK_MONOTONIC, comparable with a client's time.perf_counter()
    on Linux. Under `--clock virtual` also the request read off the virtual clock (wall-scaled
    seconds): `virtual_arrival_s` and `virtual_tokens_s`, each token's time, which the bench
    client then reports instead of its own stamps."""
    timing: Dict[str, Any] = {
        "server_ttft_s": first_sent - received,
        "arrival_s": received,
        "first_token_s": first_sent,
        "handler_s": live.arrival,
    }
    if live.virtual_scale and live.virtual_tokens:
        timing["virtual_arrival_s"] = live.engine_request.arrival * live.virtual_scale
        timing["virtual_tokens_s"] = live.virtual_tokens
    return timing


async def respond_stream(
    request: web.Request, generation: GenerationRequest, live: LiveRequest, received: float
) -> web.StreamResponse:
    """Stream the words as they come; `received` (loop clock) starts the reported TTFT."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    stream = _Stream(generation, live)
    loop = asyncio.get_running_loop()
    first_sent = None
    while True:
        await live.event.wait()
        live.event.clear()
        words = live.take()
        if words:
            chunk = stream.words(words)
            first_sent = first_sent or loop.time()  # before the write: no flattering the client
            await response.write(chunk)
        if live.done:
            break
    timing = (
        _timing(live, received, first_sent or loop.time())
        if request.headers.get(TIMING_HEADER)
        else None
    )
    await response.write(stream.closing(timing))
    await response.write_eof()
    return response


async def _collect(live: LiveRequest) -> List[str]:
    words: List[str] = []
    while not live.done:
        await live.event.wait()
        live.event.clear()
        words.extend(live.take())
    words.extend(live.take())
    return words


async def respond_json(generation: GenerationRequest, lives: List[LiveRequest]) -> web.Response:
    outputs = await asyncio.gather(*(_collect(live) for live in lives))
    prefix = "chatcmpl-" if generation.chat else "cmpl-"
    choices = []
    # zip(strict=) is Python 3.10+, and simhost runs on 3.9
    for index, (live, words) in enumerate(zip(lives, outputs)):  # noqa: B905
        text = live.echo + "".join(words)
        logprobs = choice_logprobs(generation, live, words, 0, 0)
        if generation.chat:
            message = {"role": "assistant", "content": text}
            choices.append(chat_choice(index, message, live.finish_reason, False, logprobs))
        else:
            choice = completion_choice(index, text, live.finish_reason, logprobs)
            choice["prompt_logprobs"] = prompt_logprobs(generation, live)
            choices.append(choice)
    payload = envelope(
        prefix + uuid.uuid4().hex,
        int(time.time()),
        generation.model,
        generation.chat,
        False,
        choices,
    )
    prompt_tokens = sum(live.engine_request.prompt_len for live in lives)
    payload["usage"] = usage(prompt_tokens, sum(live.generated for live in lives))
    if generation.chat:
        payload["prompt_logprobs"] = prompt_logprobs(generation, lives[0])
    return web.json_response(payload)


async def respond_response(
    request: web.Request, body: Dict[str, Any], generation: GenerationRequest, live: LiveRequest
) -> web.StreamResponse:
    """A /v1/responses answer: the whole response object, or vLLM's `event:`/`data:` stream."""
    response_id, item_id = "resp_" + uuid.uuid4().hex, "msg_" + uuid.uuid4().hex
    created = int(time.time())
    if not generation.stream:
        words = await _collect(live)
        return web.json_response(
            response_body(
                body,
                generation,
                live.max_tokens,
                created,
                response_id,
                _finished(live, item_id, words),
            )
        )
    stream = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
    await stream.prepare(request)
    sequence = _Sequence()
    shell = response_body(body, generation, live.max_tokens, created, response_id)
    await stream.write(sequence.events(opening_events(shell, item_id)))
    words = []
    while not live.done or live.pending:
        if not live.pending:
            await live.event.wait()
            live.event.clear()
        fresh = live.take()
        words.extend(fresh)
        await stream.write(sequence.events([delta_event(item_id, word) for word in fresh]))
    finished = response_body(
        body, generation, live.max_tokens, created, response_id, _finished(live, item_id, words)
    )
    await stream.write(sequence.events(closing_events(finished, item_id, "".join(words))))
    await stream.write_eof()
    return stream


def _finished(live: LiveRequest, item_id: str, words: List[str]) -> Dict[str, Any]:
    counts = usage(live.engine_request.prompt_len, live.generated)
    text = "".join(words)
    return {"item_id": item_id, "text": text, "usage": counts, "finish_reason": live.finish_reason}


class _Sequence:
    """Numbers the events of one response stream, as vLLM's `sequence_number` does."""

    def __init__(self) -> None:
        self.next = 0

    def events(self, events: List[Dict[str, Any]]) -> bytes:
        parts = []
        for event in events:
            event["sequence_number"] = self.next
            self.next += 1
            data = json.dumps(event, separators=(",", ":"))
            parts.append("event: {}\ndata: {}\n\n".format(event["type"], data).encode())
        return b"".join(parts)
