"""HTTP side of `simhost bench`: one streamed OpenAI request timed the way vLLM's bench times
it, plus the /metrics, /v1/models and /health reads the bench needs.

Knows nothing of datasets or result files; the wire work is httpstream's.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from simhost.bench.http import HttpClient, HttpError
from simhost.bench.result import RequestOutcome
from simhost.datasets import SampleRequest

TIMING_HEADER = "X-Simhost-Timing"
LOCKSTEP_HEADER = "X-Simhost-Lockstep"  # simhost.server.lockstep (a closed loop's promises)


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send requests (vLLM bench's --base-url, --endpoint, --backend...)."""

    base_url: str
    path: str
    chat: bool
    model: Optional[str]
    temperature: Optional[float]
    ignore_eos: bool
    extra_body: Dict[str, Any] = field(default_factory=dict)
    headers: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedRequest:
    """A request body encoded ahead of time, so JSON work stays out of the timed window."""

    body: bytes
    prompt_len: int


def prepare_requests(endpoint: Endpoint, samples: List[SampleRequest]) -> List[PreparedRequest]:
    return [
        PreparedRequest(json.dumps(_payload(endpoint, s)).encode(), s.prompt_len) for s in samples
    ]


def _payload(endpoint: Endpoint, sample: SampleRequest) -> Dict[str, Any]:
    payload: Dict[str, Any] = {"model": endpoint.model, "stream": True}
    if endpoint.chat:
        payload["messages"] = [{"role": "user", "content": sample.prompt}]
        payload["max_completion_tokens"] = sample.output_len
    else:
        payload["prompt"] = sample.prompt
        payload["max_tokens"] = sample.output_len
    if endpoint.temperature is not None:
        payload["temperature"] = endpoint.temperature
    if endpoint.ignore_eos:
        payload["ignore_eos"] = True
    payload["stream_options"] = {"include_usage": True}
    payload.update(endpoint.extra_body)
    return payload


class _EventReader:
    """Collects SSE events with the time their bytes arrived; parses them only after the
    stream ends, so the receive path does no JSON work while other streams wait."""

    def __init__(self, outcome: RequestOutcome, chat: bool) -> None:
        self.outcome = outcome
        self.chat = chat
        self.parts: List[str] = []
        self.last = outcome.start_time
        self.done = False
        self.user_ttft: Optional[float] = None
        self.timing: Dict[str, Any] = {}
        self._buffer = b""
        self._events: List[Tuple[float, float, bytes]] = []

    def body(self, piece: bytes, now: float) -> None:
        self._buffer += piece
        if b"\n\n" not in self._buffer:
            return
        # `now` is the kernel's receive time where there is one; `read` is when the event
        # loop handed the piece over, kept for the overhead benchmark's comparison
        read = time.perf_counter()
        *events, self._buffer = self._buffer.split(b"\n\n")
        self._events.extend((now, read, event) for event in events)

    def finish(self) -> None:
        for now, read, event in self._events:
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    self.event(line[5:].strip(), now, read)

    def event(self, data: bytes, now: float, read: float) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        message = json.loads(data)
        choices = message.get("choices")
        if choices:
            choice = choices[0]
            text = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
            if text:
                self._text(text, now, read)
        if message.get("usage"):
            self.outcome.output_tokens = message["usage"].get("completion_tokens", 0)
            self.outcome.prompt_tokens = message["usage"].get("prompt_tokens")
        if "simhost" in message:
            self.timing = message["simhost"]
            self.outcome.server_ttft = self.timing.get("server_ttft_s")
            self.outcome.server_arrival = self.timing.get("arrival_s")
            self.outcome.server_first_sent = self.timing.get("first_token_s")

    def _text(self, text: str, now: float, read: float) -> None:
        if not self.parts:
            self.outcome.ttft = now - self.outcome.start_time
            self.user_ttft = read - self.outcome.start_time
        else:
            self.outcome.itl.append(now - self.last)
        self.last = now
        self.parts.append(text)


class PendingOutcome:
    """A finished request whose events are not parsed yet: parsing waits until the timed
    phase is over, so no stream's stamps wait behind another stream's JSON work."""

    def __init__(self, outcome: RequestOutcome, reader: _EventReader) -> None:
        self.outcome = outcome
        self.reader = reader
        self.status = 0
        self.error_body: List[bytes] = []

    @property
    def user_ttft(self) -> Optional[float]:
        """After finish(): the TTFT from a user-space stamp, when the loop read the bytes."""
        return self.reader.user_ttft

    @property
    def timing(self) -> Dict[str, Any]:
        """After finish(): simhost's X-Simhost-Timing event ({} from other servers)."""
        return self.reader.timing

    def on_status(self, status: int) -> None:
        self.status = status

    def on_body(self, piece: bytes, now: float) -> None:
        if self.status == 200:
            self.reader.body(piece, now)
        else:
            self.error_body.append(piece)

    def finish(self) -> RequestOutcome:
        outcome, reader = self.outcome, self.reader
        if outcome.error:
            return outcome
        if self.status != 200:
            text = b"".join(self.error_body)[:300].decode("utf-8", "replace")
            outcome.error = "HTTP {}: {}".format(self.status, text)
            return outcome
        try:
            reader.finish()
        except ValueError as problem:
            outcome.error = "a stream event is not JSON: {}".format(problem)
            return outcome
        return _judge(outcome, reader)


def _judge(outcome: RequestOutcome, reader: _EventReader) -> RequestOutcome:
    outcome.latency = reader.last - outcome.start_time if reader.parts else 0.0
    tokens = reader.timing.get("virtual_tokens_s")
    if tokens and reader.parts:
        # a simhost server on its virtual clock: its model's timings, not this machine's
        arrival = float(reader.timing["virtual_arrival_s"])
        outcome.ttft = tokens[0] - arrival
        outcome.itl = [b - a for a, b in zip(tokens, tokens[1:])]  # noqa: B905, RUF007 (3.9)
        outcome.latency = tokens[-1] - arrival
        outcome.virtual_span = (arrival, tokens[-1])
    outcome.generated_text = "".join(reader.parts)
    if not reader.done:
        outcome.error = "the stream ended before data: [DONE]"
    elif not reader.parts:
        outcome.error = "the stream carried no text"
    else:
        outcome.success = True
        outcome.output_tokens = outcome.output_tokens or len(reader.parts)
    return outcome


async def send_request(
    client: HttpClient,
    endpoint: Endpoint,
    prepared: PreparedRequest,
    since: Optional[float] = None,
    promise: Optional[str] = None,
) -> PendingOutcome:
    """Stream one request; never raises for a failed request (the outcome carries the error).
    Call `.finish()` on the result once timing is over."""
    headers = dict(endpoint.headers)
    headers[TIMING_HEADER] = "1"
    headers["Content-Type"] = "application/json"
    if promise is not None:
        headers[LOCKSTEP_HEADER] = promise
    outcome = RequestOutcome(prompt_len=prepared.prompt_len, start_time=time.perf_counter())
    outcome.queue_time = outcome.start_time - since if since is not None else 0.0
    pending = PendingOutcome(outcome, _EventReader(outcome, endpoint.chat))
    try:
        await client.request(
            "POST", endpoint.path, prepared.body, headers, pending.on_body, pending.on_status
        )
    except (HttpError, asyncio.TimeoutError, OSError) as error:
        outcome.error = "{}: {}".format(type(error).__name__, error)
    return pending


async def fetch_text(client: HttpClient, path: str) -> str:
    status, body = await client.request("GET", path)
    if status != 200:
        raise HttpError("GET {} answered HTTP {}".format(path, status))
    return body.decode("utf-8", "replace")


async def first_model(client: HttpClient) -> str:
    """The first served model, as `vllm bench serve` picks it when --model is not given."""
    model: str = json.loads(await fetch_text(client, "/v1/models"))["data"][0]["id"]
    return model


async def is_healthy(client: HttpClient) -> bool:
    try:
        status, _ = await client.request("GET", "/health")
    except (HttpError, asyncio.TimeoutError, OSError):
        return False
    return status == 200
