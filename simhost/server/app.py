"""`simhost serve`: the aiohttp app of the emulated vLLM server (OpenAI routes, /health,
/metrics, /version), its fault injection, and its process lifecycle.

The only module that imports aiohttp's server side. Never imported by `smi`, `tier`, `version`.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Sequence, Union

from aiohttp import web

from simhost.engine.batching import Engine, EngineRequest
from simhost.engine.cacheconfig import cache_config_labels
from simhost.host.statefile import ServerState, remove_state, write_state
from simhost.kernelstamps import StampedConnection, listen
from simhost.server.args import ServeSettings
from simhost.server.faults import CRASH_EXIT_STATUS, FaultDice
from simhost.server.kvbm import start_kvbm_metrics
from simhost.server.lockstep import LOCKSTEP_HEADER, parse_promise
from simhost.server.metrics import ServerMetrics
from simhost.server.modelroutes import add_model_routes
from simhost.server.protocol import (
    ApiError,
    GenerationRequest,
    check_context,
    parse_chat,
    parse_completion,
    parse_json_body,
)
from simhost.server.responses import parse_responses
from simhost.server.runtime import EngineLoop, LiveRequest, StepObserver
from simhost.server.sglang import add_personality_routes
from simhost.server.streaming import respond_json, respond_response, respond_stream
from simhost.textgen import OutputText, block_hashes, cached_tokenize, detokenize, prompt_seed

if TYPE_CHECKING:  # annotation only: serving needs nothing from aiohttp.typedefs
    from aiohttp.typedefs import Middleware

STATE_INTERVAL_S = 0.5
ARRIVAL_KEY = "simhost_arrival"
RECEIVED_KEY = "simhost_received"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _MetricsObserver(StepObserver):
    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def first_token(self, live: LiveRequest, ttft: float, queue_time: float) -> None:
        self._metrics.ttft.observe(ttft)
        self._metrics.queue.observe(queue_time)
        live.scheduled = live.arrival + queue_time

    def next_token(self, live: LiveRequest, gap: float) -> None:
        self._metrics.itl.observe(gap)

    def finished(self, live: LiveRequest) -> None:
        metrics = self._metrics
        request = live.engine_request
        end = live.last_token or live.arrival
        metrics.e2e.observe(end - live.arrival)
        if live.generated > 1 and live.first_token is not None:
            metrics.tpot.observe((end - live.first_token) / (live.generated - 1))
        metrics.prompt_tokens.observe(request.prompt_len)
        metrics.generation_tokens.observe(live.generated)
        computed = request.prompt_len - request.local_hit_tokens - request.external_hit_tokens
        metrics.computed_tokens.observe(computed)
        if live.first_token is not None:
            start = live.scheduled or live.arrival
            metrics.prefill.observe(live.first_token - start)
            metrics.decode.observe(end - live.first_token)
            metrics.inference.observe(end - start)
        metrics.max_generation.observe(live.max_tokens)
        metrics.params_max_tokens.observe(live.max_tokens)
        metrics.params_n.observe(1)  # simhost runs each of n choices as its own sequence
        metrics.request_preemptions.observe(request.preemptions)
        metrics.count_finished(live.finish_reason or "length")


class SimServer:
    """One emulated vLLM server: engine, pacing loop, metrics and fault state."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.engine = Engine(settings.engine)
        self.started = time.monotonic()
        self.finished = 0
        self.dice = FaultDice(settings.faults)
        labels = cache_config_labels(self.engine, settings.gpu_memory_utilization)
        labels["num_gpu_blocks_override"] = str(settings.num_gpu_blocks_override)
        self.metrics = ServerMetrics(
            self.engine, settings.served_model_names[0], labels, self.leaked_bytes
        )
        self.loop = EngineLoop(
            self.engine, settings.time_scale, self.drift_factor, _MetricsObserver(self.metrics)
        )
        self.loop.virtual_clock, self.loop.speed = settings.virtual_clock, settings.speed
        self._busy_mark = (time.monotonic(), 0.0)
        self.utilization = 0.0
        self.connections: Dict[int, StampedConnection] = {}  # by fd, filled by the listeners

    def received_at(self, request: web.Request, now: float) -> float:
        """When the kernel received the request's bytes (the last read before its handler
        started), so time the request waited for a busy event loop counts as server time."""
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        connection = self.connections.get(sock.fileno()) if sock is not None else None
        if connection is None or connection.received_at is None:
            return now
        return min(connection.received_at, now)

    def fault_hours(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.settings.faults.elapsed_hours(elapsed, self.settings.time_scale)

    def drift_factor(self) -> float:
        return self.settings.faults.drift_factor(self.fault_hours())

    def leaked_bytes(self) -> int:
        return self.settings.faults.leaked_bytes(self.fault_hours())

    def check_faults(self) -> None:
        """Crash or hang when a fault's trigger is reached."""
        faults = self.settings.faults
        elapsed = time.monotonic() - self.started
        if faults.should_crash(self.finished, elapsed):
            print("simhost: injected crash (exit {})".format(CRASH_EXIT_STATUS), flush=True)
            os._exit(CRASH_EXIT_STATUS)
        if not self.loop.hung and faults.should_hang(self.finished, elapsed):
            print("simhost: injected hang, no further answers", flush=True)
            self.loop.hung = True

    def engine_request(self, ids: Sequence[int], max_tokens: int, salt: int) -> EngineRequest:
        return EngineRequest(
            req_id=uuid.uuid4().hex,
            prompt_hashes=block_hashes(ids, self.settings.engine.block_size),
            prompt_len=len(ids),
            max_tokens=max_tokens,
            salt=salt,
            arrival=0.0,
        )

    def gpu_state(self) -> ServerState:
        host = self.settings.host_config
        now = time.monotonic()
        mark_time, mark_busy = self._busy_mark
        if now - mark_time >= STATE_INTERVAL_S / 2:
            busy = self.loop.busy_wall - mark_busy
            self.utilization = min(100.0, 100.0 * busy / (now - mark_time))
            self._busy_mark = (now, self.loop.busy_wall)
        reserved = host.gpu_memory_mib * self.settings.gpu_memory_utilization
        leak_mib = self.leaked_bytes() / (1 << 20) / host.gpu_count
        used = min(float(host.gpu_memory_mib), reserved + leak_mib)
        return ServerState(
            pid=os.getpid(),
            port=self.settings.port,
            memory_used_mib=[used] * host.gpu_count,
            utilization_pct=[self.utilization] * host.gpu_count,
        )


def _error_response(error: ApiError) -> web.Response:
    return web.json_response(error.body(), status=error.status)


def _handler_label(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "other"


def _middleware(server: SimServer) -> Middleware:
    http_counts = server.metrics.http_requests

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        now = asyncio.get_running_loop().time()
        request[ARRIVAL_KEY] = now  # /metrics' TTFT starts here, after HTTP parsing, as vLLM's
        request[RECEIVED_KEY] = server.received_at(request, now)  # the X-Simhost-Timing TTFT's
        # Let requests that arrived together all take their arrival time before any of them
        # parses a long prompt, so the intake queue counts as server time, not client time.
        await asyncio.sleep(0)
        server.check_faults()
        if server.loop.hung:
            await asyncio.Event().wait()  # accept, never answer
        try:
            response = await handler(request)
        except ApiError as error:
            response = _error_response(error)
        except ConnectionResetError:
            raise  # the client went away mid-answer: nothing to send, nothing to log
        except web.HTTPException as error:
            # unknown routes and methods answer OpenAI-style JSON too
            details: Dict[str, Union[str, int, None]] = {
                "message": error.reason,
                "type": "NotFoundError",
                "param": None,
            }
            details["code"] = error.status
            body = {"error": details}
            response = web.json_response(body, status=error.status)
        except Exception as error:
            print("simhost: internal error: {!r}".format(error), file=sys.stderr, flush=True)
            response = _error_response(ApiError(500, "Internal server error: {}".format(error)))
        key = (_handler_label(request), request.method, "{}xx".format(response.status // 100))
        http_counts[key] = http_counts.get(key, 0) + 1
        return response

    return middleware


async def _generate(server: SimServer, request: web.Request, chat: bool) -> web.StreamResponse:
    body = parse_json_body(await request.read())
    names = server.settings.served_model_names
    generation = parse_chat(body, names) if chat else parse_completion(body, names)
    return await _answer(server, request, generation, None)


async def _respond(server: SimServer, request: web.Request) -> web.StreamResponse:
    """/v1/responses: the chat generation, answered as a response object (responses.py)."""
    body = parse_json_body(await request.read())
    names = server.settings.served_model_names
    generation = parse_responses(body, names, server.settings.engine.preset.max_model_len)
    return await _answer(server, request, generation, body)


async def _answer(
    server: SimServer,
    request: web.Request,
    generation: GenerationRequest,
    responses_body: Optional[Dict[str, Any]],
) -> web.StreamResponse:
    if generation.stream and len(generation.prompts) * generation.n > 1:
        raise ApiError(400, "simhost streams one prompt per request, with n=1.", "prompt")
    arrival = request[ARRIVAL_KEY]
    token_lists = [await _token_ids(prompt) for prompt in generation.prompts]
    server.loop.expect(parse_promise(request.headers.get(LOCKSTEP_HEADER)))  # before submit
    lives = [
        _start(server, prompt, ids, generation, arrival, choice)
        for prompt, ids in zip(generation.prompts, token_lists)  # noqa: B905 (Python 3.9)
        for choice in range(generation.n)
    ]
    try:
        if responses_body is not None:
            response = await respond_response(request, responses_body, generation, lives[0])
        elif generation.stream:
            received = request[RECEIVED_KEY]
            response = await respond_stream(request, generation, lives[0], received)
        else:
            response = await respond_json(generation, lives)
    finally:
        for live in lives:
            if not live.done:
                server.loop.abort(live)
                server.metrics.count_finished("abort")
    server.finished += 1
    server.check_faults()
    return response


async def _token_ids(prompt: Union[str, List[int]]) -> List[int]:
    """A text prompt's ids, off the event loop (the tokenizer releases the GIL); ids as they are."""
    if not isinstance(prompt, str):
        return prompt
    return await asyncio.get_running_loop().run_in_executor(None, cached_tokenize, prompt)


def _start(
    server: SimServer,
    prompt: Union[str, List[int]],
    ids: List[int],
    generation: GenerationRequest,
    arrival: float,
    choice: int,
) -> LiveRequest:
    text = prompt if isinstance(prompt, str) else None
    max_tokens = check_context(
        len(ids),
        generation.max_tokens,
        server.settings.engine.preset.max_model_len,
        from_text=text is not None,
    )
    if server.dice.fail_this_request():
        server.metrics.count_finished("error")
        raise ApiError(500, "simhost injected fault: internal server error")
    fingerprint = prompt_seed(text if text is not None else ",".join(map(str, ids)))
    wrong = server.engine.tier is not None and server.dice.corrupt_this_output(fingerprint)
    # n > 1 samples differ unless greedy (vLLM's seeds per choice do the same).
    seed = None if generation.seed is None else generation.seed + choice
    output = OutputText(fingerprint, generation.temperature, seed, wrong)
    live = LiveRequest(
        server.engine_request(ids, max_tokens, output.salt),
        output,
        arrival,
        max_tokens,
    )
    live.echo = (text if text is not None else detokenize(ids)) if generation.echo else ""
    live.prompt_ids, live.prompt_salt = list(ids), fingerprint
    server.loop.submit(live)
    return live


def build_app(server: SimServer) -> web.Application:
    app = web.Application(middlewares=[_middleware(server)], client_max_size=256 * 1024 * 1024)
    settings = server.settings
    names = settings.served_model_names

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"version": settings.host_config.vllm_version})

    async def completions(request: web.Request) -> web.StreamResponse:
        return await _generate(server, request, chat=False)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await _generate(server, request, chat=True)

    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    add_personality_routes(app, server)  # /metrics, in the names of the engine emulated
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/responses", lambda request: _respond(server, request))
    add_model_routes(app, server.metrics.created, names, settings.engine.preset.max_model_len)
    return app


async def _state_writer(server: SimServer) -> None:
    directory = server.settings.state_dir
    loop = asyncio.get_running_loop()
    while True:
        if not server.loop.hung:
            # file system calls off the event loop: a slow rename must not delay tokens
            await loop.run_in_executor(None, write_state, directory, server.gpu_state())
        server.check_faults()
        await asyncio.sleep(STATE_INTERVAL_S if not _time_faults(server) else 0.05)


def _time_faults(server: SimServer) -> bool:
    faults = server.settings.faults
    return faults.crash_after_seconds is not None or faults.hang_after_seconds is not None


async def serve_forever(settings: ServeSettings) -> int:
    """Start listening after the emulated load time; stop cleanly on SIGTERM or SIGINT."""
    if settings.load_time_s > 0:
        await asyncio.sleep(settings.load_time_s)
    server = SimServer(settings)
    runner = web.AppRunner(build_app(server), access_log=None)
    await runner.setup()
    for listener in listen(settings.host, settings.port, 2048, server.connections):
        await web.SockSite(runner, listener, backlog=2048).start()
    kvbm = await start_kvbm_metrics(server)  # Dynamo KVBM's own port, when configured
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    gc.freeze()  # as vLLM does after start-up: long-lived objects leave the collector's scans
    tasks = [asyncio.ensure_future(server.loop.run()), asyncio.ensure_future(_state_writer(server))]
    _announce(settings)
    await stop.wait()
    for task in tasks:
        task.cancel()
    try:
        # a hung handler never returns; do not let it keep a SIGTERM'd server alive
        await asyncio.wait_for(runner.cleanup(), timeout=1.0)
    except asyncio.TimeoutError:
        print("simhost: requests still open at shutdown were dropped", flush=True)
    if kvbm is not None:
        await kvbm.cleanup()
    remove_state(settings.state_dir, os.getpid())
    print("simhost: stopped", flush=True)
    return 0


def _announce(settings: ServeSettings) -> None:
    engine = settings.engine
    summary = {
        "model": settings.served_model_names[0],
        "preset": engine.preset.name,
        "enable_prefix_caching": engine.enable_prefix_caching,
        "kv_offloading_size": engine.kv_offloading_gib,
        "num_gpu_blocks": engine.num_gpu_blocks,
        "time_scale": settings.time_scale,
        "faults": settings.faults.any_active(),
    }
    print("simhost (vLLM test double) config: " + json.dumps(summary), flush=True)
    url = "http://{}:{}".format(settings.host, settings.port)
    print("simhost (vLLM test double) serving on {}".format(url), flush=True)
