"""Drives the pure engine in real time: paces each step to its emulated duration times
--time-scale, then hands the produced words to the waiting HTTP handlers.

Owns the asyncio pacing loop. Imports asyncio and simhost only (no aiohttp, no prometheus).
"""

from __future__ import annotations

import asyncio
from typing import Callable, Dict, List, Optional

from simhost.engine.batching import Engine, EngineRequest, StepResult
from simhost.server.lockstep import GRACE_S, Lockstep, Promise
from simhost.textgen import OutputText

MAX_LAG_S = 0.05  # wall lag after which pacing gives up catching up and re-anchors


class LiveRequest:
    """One HTTP-side sequence: its engine request, its words, and wall-clock timestamps."""

    def __init__(
        self, engine_request: EngineRequest, output: OutputText, arrival: float, max_tokens: int
    ) -> None:
        self.engine_request = engine_request
        self.output = output
        self.arrival = arrival
        self.max_tokens = max_tokens
        self.pending: List[str] = []
        self.event = asyncio.Event()
        self.done = False
        self.finish_reason: Optional[str] = None
        self.first_token: Optional[float] = None
        self.last_token: Optional[float] = None
        self.generated = 0
        self.scheduled: Optional[float] = None  # wall time the engine first scheduled it
        self.echo = ""  # the prompt text sent back before the output (completions `echo`)
        self.prompt_ids: List[int] = []  # for prompt logprobs
        self.prompt_salt = 0  # the prompt's fingerprint: its logprobs are the same per choice
        self.promise: Optional[Promise] = None  # a closed-loop client's (simhost.server.lockstep)
        self.virtual_tokens: List[float] = []  # the virtual clock at each token, wall-scaled
        self.virtual_scale = 0.0  # wall seconds per virtual second when reported; 0: not

    def take(self) -> List[str]:
        words, self.pending = self.pending, []
        return words


class StepObserver:
    """Hooks the server gives the loop for metrics (all times in wall seconds)."""

    def first_token(self, live: LiveRequest, ttft: float, queue_time: float) -> None: ...

    def next_token(self, live: LiveRequest, gap: float) -> None: ...

    def finished(self, live: LiveRequest) -> None: ...


class EngineLoop:
    """Owns the virtual clock. Emulated time advances by step durations; wall time follows it
    at `time_scale` wall seconds per emulated second, catching up after short stalls.

    With `virtual` set, the clock is also what the server reports: each request's timings are
    read off the virtual clock (times `time_scale`, so in the wall seconds an idle machine
    would show), observed metrics too, and the clock holds while a closed-loop client's
    promised requests are on their way; a busy machine then slows the run, not its numbers.
    `speed` scales every step (the run's seeded noise)."""

    def __init__(
        self,
        engine: Engine,
        time_scale: float,
        drift_factor: Callable[[], float],
        observer: StepObserver,
        virtual: bool = False,
        speed: float = 1.0,
    ) -> None:
        self.engine = engine
        self.time_scale = time_scale
        self.virtual_clock = virtual
        self.speed = speed
        self.lockstep = Lockstep()
        self._promise: Optional[Promise] = None
        self.virtual = 0.0
        self.busy_wall = 0.0  # wall seconds spent in steps, for GPU utilization
        self.hung = False
        self._drift_factor = drift_factor
        self._observer = observer
        self._live: Dict[EngineRequest, LiveRequest] = {}
        self._wake = asyncio.Event()
        self._idle = False  # the loop is waiting for work (not stepping, pacing or holding)
        self._latest_arrival = 0.0
        self._anchor_wall = 0.0
        self._anchor_virtual = 0.0

    def expect(self, promise: Optional[Promise]) -> None:
        """The closed-loop promise the next submitted request carries (simhost.server.lockstep)."""
        self._promise = promise

    def submit(self, live: LiveRequest) -> None:
        live.promise, self._promise = self._promise, None
        now = asyncio.get_running_loop().time()
        projected = self._anchor_virtual + (now - self._anchor_wall) / self.time_scale
        live.engine_request.arrival = max(self.virtual, projected)
        if self.virtual_clock and live.promise is not None:
            live.engine_request.arrival = self.virtual  # the clock held for it
            self.lockstep.arrived(live.promise)
        elif self.virtual_clock and not self._idle:
            # An open-loop arrival while the loop steps: wall time projected past the clock is
            # the machine lagging, not the model; arriving later than the clock's now would
            # let the engine schedule it before it came (negative TTFT and prefill times).
            live.engine_request.arrival = self.virtual
        self._latest_arrival = max(self._latest_arrival, live.engine_request.arrival)
        if self.virtual_clock:
            live.virtual_scale = self.time_scale
            live.arrival = live.engine_request.arrival * self.time_scale
        self._live[live.engine_request] = live
        self.engine.add(live.engine_request)
        self._wake.set()

    def abort(self, live: LiveRequest) -> None:
        if self._live.pop(live.engine_request, None) is not None:
            self.engine.abort(live.engine_request)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._rebase(loop.time())
        while True:
            if self.hung:
                await asyncio.Event().wait()  # a hang never ends
            if self.virtual_clock and self.lockstep.waiting():
                await self._hold(loop)
                continue
            if not self.engine.has_work():
                await self._wait_for_work(loop, None)
                continue
            result = self.engine.step(self.virtual)
            if result.idle:
                await self._wait_for_work(loop, result.duration)
                continue
            await self._pace(loop, result.duration * self._drift_factor() * self.speed)
            # under the virtual clock every stamp is the clock's (wall-scaled), metrics too
            now = self.virtual * self.time_scale if self.virtual_clock else loop.time()
            self._deliver(result, now)

    async def _hold(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait, clock stopped, for a promised request (simhost.server.lockstep)."""
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), GRACE_S)
        except asyncio.TimeoutError:
            self.lockstep.give_up()
        self._rebase(loop.time())

    def _rebase(self, now: float) -> None:
        self._anchor_wall = now
        self._anchor_virtual = self.virtual

    async def _wait_for_work(self, loop: asyncio.AbstractEventLoop, limit: Optional[float]) -> None:
        """Sleep until a request arrives or, while KV loads are in flight, until they land."""
        self._wake.clear()
        self._idle = True
        started = loop.time()
        timeout = None if limit is None else limit * self.time_scale
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
            if self.virtual_clock:
                # The clock goes to the arrival that ended the wait: a promised one arrived at
                # the held clock (the wall time it took to come is the machine's, not the
                # model's), an open-loop one at its projected time.
                self.virtual = max(self.virtual, self._latest_arrival)
            else:
                elapsed = (loop.time() - started) / self.time_scale
                self.virtual += elapsed if limit is None else min(elapsed, limit)
        except asyncio.TimeoutError:
            self.virtual += limit or 0.0
        finally:
            self._idle = False
        self._rebase(loop.time())

    async def _pace(self, loop: asyncio.AbstractEventLoop, duration: float) -> None:
        target = (
            self._anchor_wall + (self.virtual + duration - self._anchor_virtual) * self.time_scale
        )
        delay = target - loop.time()
        # yield even when behind, so handlers write the tokens of the previous step
        await asyncio.sleep(max(0.0, delay))
        self.virtual += duration
        self.busy_wall += duration * self.time_scale
        if loop.time() - target > MAX_LAG_S:
            self._rebase(loop.time())

    def _deliver(self, result: StepResult, now: float) -> None:
        finished = set(result.finished)
        # First tokens go out before the rest of the step's tokens: handlers wake in this order,
        # so a new stream's first chunk is not queued behind every running stream's next one.
        emitted = sorted(result.emitted, key=lambda r: r.generated != 1)
        for engine_request in emitted:
            live = self._live.get(engine_request)
            if live is None:
                continue
            live.pending.append(live.output.next_word())
            live.generated += 1
            live.virtual_tokens.append(self.virtual * self.time_scale)
            self._observe_token(live, engine_request, now)
            if engine_request in finished:
                self.lockstep.finished(live.promise)
                del self._live[engine_request]
                live.done = True
                live.finish_reason = "length"
                self._observer.finished(live)
            live.event.set()

    def _observe_token(self, live: LiveRequest, engine_request: EngineRequest, now: float) -> None:
        if live.first_token is None:
            scheduled = engine_request.first_scheduled or engine_request.arrival
            queue_time = max(0.0, scheduled - engine_request.arrival) * self.time_scale
            live.first_token = now
            self._observer.first_token(live, now - live.arrival, queue_time)
        else:
            self._observer.next_token(live, now - (live.last_token or now))
        live.last_token = now
