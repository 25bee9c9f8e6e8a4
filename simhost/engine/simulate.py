"""Closed-loop runs of the engine in virtual time: what a bench run would measure, with no HTTP.

Used by `python -m simhost simulate`, by the model-outcome tests and to calibrate the scenarios.
Pure logic; imports only the standard library and simhost's pure modules.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import Deque, Dict, List, Sequence, Tuple

from simhost.datasets import SampleRequest, Workload
from simhost.engine.batching import Engine, EngineRequest
from simhost.textgen import block_hashes, prompt_seed, tokenize

_ids = itertools.count()


@dataclass(frozen=True)
class SimTiming:
    """One request as a client would see it, in virtual seconds."""

    ttft: float
    latency: float
    output_tokens: int
    local_hit_tokens: int
    external_hit_tokens: int


@dataclass(frozen=True)
class SimResult:
    timings: List[SimTiming]
    duration: float

    def ttft_median(self) -> float:
        values = sorted(t.ttft for t in self.timings)
        middle = len(values) // 2
        return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2

    def output_throughput(self) -> float:
        return sum(t.output_tokens for t in self.timings) / self.duration


def engine_request(sample: SampleRequest, block_size: int, arrival: float) -> EngineRequest:
    words = tokenize(sample.prompt)
    return EngineRequest(
        req_id="sim-{}".format(next(_ids)),
        prompt_hashes=block_hashes(words, block_size),
        prompt_len=len(words),
        max_tokens=sample.output_len,
        salt=prompt_seed(sample.prompt),
        arrival=arrival,
    )


def run_phase(
    engine: Engine, samples: Sequence[SampleRequest], concurrency: int, start: float
) -> Tuple[List[SimTiming], float]:
    """Keep `concurrency` requests in flight until every sample is done; return (timings, end)."""
    pending: Deque[SampleRequest] = deque(samples)
    first_token: Dict[EngineRequest, float] = {}
    active: List[EngineRequest] = []
    timings: List[SimTiming] = []
    now = start
    while pending or active:
        while pending and len(active) < concurrency:
            request = engine_request(pending.popleft(), engine.config.block_size, now)
            engine.add(request)
            active.append(request)
        result = engine.step(now)
        if result.idle and result.duration == 0:
            raise RuntimeError("engine stalled with {} requests in flight".format(len(active)))
        now += result.duration
        for request in result.emitted:
            first_token.setdefault(request, now)
        for request in result.finished:
            active.remove(request)
            timings.append(_timing(request, first_token.pop(request), now))
    return timings, now


def _timing(request: EngineRequest, first: float, end: float) -> SimTiming:
    return SimTiming(
        ttft=first - request.arrival,
        latency=end - request.arrival,
        output_tokens=request.generated,
        local_hit_tokens=request.local_hit_tokens,
        external_hit_tokens=request.external_hit_tokens,
    )


def simulate(engine: Engine, workload: Workload, concurrency: int) -> SimResult:
    """Run warm-up and flush phases unmeasured, then the measured phase."""
    now = 0.0
    for phase in (workload.warmup, workload.flush):
        _, now = run_phase(engine, phase, concurrency, now)
    timings, end = run_phase(engine, workload.measured, concurrency, now)
    return SimResult(timings=timings, duration=end - now)
