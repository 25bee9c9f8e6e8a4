"""`simhost bench`: runs the unmeasured phases (cold_recovery warm-up and flush), then the measured
requests at the asked concurrency and rate, and writes vLLM's result file.

Owns the bench's asyncio orchestration and result-file writing; HTTP lives in loadclient.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence

from simhost.bench.client import (
    Endpoint,
    PendingOutcome,
    PreparedRequest,
    fetch_text,
    first_model,
    is_healthy,
    prepare_requests,
    send_request,
)
from simhost.bench.http import HttpClient, HttpError
from simhost.bench.result import RequestOutcome, build_result, render_summary
from simhost.datasets import DatasetSpec, build_workload


class BenchError(RuntimeError):
    """A bench that cannot start (server unreachable, flush size unknown...)."""


@dataclass(frozen=True)
class BenchSettings:
    endpoint: Endpoint
    backend: str
    dataset: DatasetSpec
    max_concurrency: Optional[int]
    request_rate: float
    burstiness: float
    num_warmups: int
    flush_ratio: float
    percentile_metrics: List[str]
    metric_percentiles: List[float]
    label: Optional[str]
    tokenizer_id: str
    metadata: Dict[str, str]
    ready_check_timeout_s: float
    request_timeout_s: float
    save_result: bool
    save_detailed: bool
    append_result: bool
    result_dir: Optional[str]
    result_filename: Optional[str]


async def _arrivals(
    count: int, rate: float, burstiness: float, rng: random.Random
) -> AsyncIterator[int]:
    """vLLM's request generator: gamma-distributed gaps (Poisson when burstiness is 1)."""
    for index in range(count):
        yield index
        if rate != float("inf") and index < count - 1:
            await asyncio.sleep(rng.gammavariate(burstiness, 1.0 / (rate * burstiness)))


@dataclass(frozen=True)
class Measurement:
    """The measured phase of a bench run, before it becomes a result file."""

    settings: BenchSettings  # with the model filled in
    requests: List[PendingOutcome]  # finished: their outcomes are final
    duration: float
    num_prompts: int

    @property
    def outcomes(self) -> List[RequestOutcome]:
        return [request.outcome for request in self.requests]


async def run_phase(
    client: HttpClient,
    settings: BenchSettings,
    samples: Sequence[PreparedRequest],
    rate: float,
) -> List[PendingOutcome]:
    """Send the samples at `rate` under the concurrency cap; call finish() on the results."""
    limit = asyncio.Semaphore(settings.max_concurrency) if settings.max_concurrency else None
    rng = random.Random(settings.dataset.seed)  # noqa: S311 - arrival times, not secrets
    promises = _promises(len(samples), settings.max_concurrency if rate == float("inf") else None)

    async def one(index: int) -> PendingOutcome:
        prepared = samples[index]
        if limit is None:
            return await send_request(client, settings.endpoint, prepared)
        dispatched = time.perf_counter()
        async with limit:
            # vLLM's client_queue_time: from dispatch until the concurrency cap let it go.
            return await send_request(
                client, settings.endpoint, prepared, dispatched, promises[index]
            )

    tasks = []
    async for index in _arrivals(len(samples), rate, settings.burstiness, rng):
        tasks.append(asyncio.ensure_future(one(index)))
    return list(await asyncio.gather(*tasks))


def _promises(count: int, concurrency: Optional[int]) -> List[Optional[str]]:
    """A closed loop's X-Simhost-Lockstep values (simhost.server.lockstep): the run keeps
    `burst` requests in flight and sends `count` in all."""
    if not concurrency:
        return [None] * count
    run, burst = uuid.uuid4().hex, min(concurrency, count)
    return ["{} {} {}".format(run, burst, count)] * count


async def _server_kv_tokens(client: HttpClient, base_url: str) -> int:
    """GPU KV capacity in tokens, from vllm:cache_config_info on the server's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families  # cold_recovery only

    try:
        text = await fetch_text(client, "/metrics")
    except (HttpError, OSError, asyncio.TimeoutError) as error:
        raise BenchError(
            "cold_recovery: cannot read {}/metrics ({})".format(base_url, error)
        ) from None
    for family in text_string_to_metric_families(text):
        if family.name != "vllm:cache_config_info":
            continue
        labels = family.samples[0].labels
        if labels.get("kv_cache_size_tokens", "None") != "None":
            return int(labels["kv_cache_size_tokens"])
        return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    raise BenchError(
        "cold_recovery: the server's /metrics has no vllm:cache_config_info; "
        "give --cold-recovery-flush-tokens"
    )


async def _wait_ready(client: HttpClient, settings: BenchSettings) -> None:
    deadline = time.monotonic() + settings.ready_check_timeout_s
    while not await is_healthy(client):
        if time.monotonic() > deadline:
            raise BenchError(
                "the server at {} did not become healthy within {} s".format(
                    settings.endpoint.base_url, settings.ready_check_timeout_s
                )
            )
        await asyncio.sleep(0.2)


async def _prepare_dataset(client: HttpClient, settings: BenchSettings) -> DatasetSpec:
    spec = settings.dataset
    if spec.name == "cold_recovery" and spec.flush_tokens is None:
        kv_tokens = await _server_kv_tokens(client, settings.endpoint.base_url)
        spec = replace(spec, flush_tokens=int(kv_tokens * settings.flush_ratio))
    return spec


async def _with_model(client: HttpClient, settings: BenchSettings) -> BenchSettings:
    if settings.endpoint.model:
        return settings
    try:
        name = await first_model(client)
    except (HttpError, OSError, asyncio.TimeoutError, ValueError, KeyError, IndexError) as error:
        raise BenchError(
            "--model not given and {}/v1/models failed ({})".format(
                settings.endpoint.base_url, error
            )
        ) from None
    endpoint = replace(settings.endpoint, model=name)
    return replace(settings, endpoint=endpoint, tokenizer_id=settings.tokenizer_id or name)


async def measure(settings: BenchSettings) -> Measurement:
    """Wait for the server, run the unmeasured phases, then time the measured requests."""
    client = HttpClient(settings.endpoint.base_url, settings.request_timeout_s)
    try:
        if settings.ready_check_timeout_s > 0:
            await _wait_ready(client, settings)
        settings = await _with_model(client, settings)
        workload = build_workload(await _prepare_dataset(client, settings))
        inf = float("inf")
        for phase in (
            workload.measured[: settings.num_warmups],
            workload.warmup,
            workload.flush,
        ):
            await run_phase(client, settings, prepare_requests(settings.endpoint, phase), inf)
        measured = prepare_requests(settings.endpoint, workload.measured)
        gc.collect()
        gc.freeze()  # the prompts live until the end: keep collector passes short while timing
        started = time.perf_counter()
        requests = await run_phase(client, settings, measured, settings.request_rate)
        duration = time.perf_counter() - started  # events are parsed after the clock stops
    finally:
        client.close()
    for request in requests:
        request.finish()
    spans = [r.outcome.virtual_span for r in requests if r.outcome.success]
    if spans and all(spans):
        # a simhost on its virtual clock: the run lasted as long as its model says
        duration = max(s[1] for s in spans if s) - min(s[0] for s in spans if s)
    return Measurement(settings, requests, duration, len(workload.measured))


def result_of(measurement: Measurement) -> Dict[str, Any]:
    settings = measurement.settings
    return build_result(
        _metadata(settings, measurement.num_prompts),
        measurement.outcomes,
        measurement.duration,
        settings.percentile_metrics,
        settings.metric_percentiles,
        settings.save_detailed,
    )


async def run_bench(settings: BenchSettings) -> Dict[str, Any]:
    return result_of(await measure(settings))


def _metadata(settings: BenchSettings, num_prompts: int) -> Dict[str, Any]:
    rate = settings.request_rate
    metadata: Dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": settings.backend,
        "backend": settings.backend,
        "label": settings.label,
        "model_id": settings.endpoint.model,
        "tokenizer_id": settings.tokenizer_id,
        "num_prompts": num_prompts,
    }
    metadata.update(settings.metadata)
    metadata["request_rate"] = "inf" if rate == float("inf") else rate
    metadata["burstiness"] = settings.burstiness
    metadata["max_concurrency"] = settings.max_concurrency
    return metadata


def result_path(settings: BenchSettings, result: Dict[str, Any]) -> str:
    """vLLM's default name: {label or backend}-{rate}qps[-concurrency{N}]-{model}-{date}.json."""
    name = settings.result_filename
    if not name:
        concurrency = (
            "-concurrency{}".format(result["max_concurrency"]) if result["max_concurrency"] else ""
        )
        assert settings.endpoint.model is not None  # filled in by _with_model
        model = settings.endpoint.model.split("/")[-1]
        name = "{}-{}qps{}-{}-{}.json".format(
            settings.label or settings.backend,
            result["request_rate"],
            concurrency,
            model,
            result["date"],
        )
    return os.path.join(settings.result_dir, name) if settings.result_dir else name


def save_result(settings: BenchSettings, result: Dict[str, Any]) -> str:
    """One compact JSON line, like vLLM; --append-result adds a line to an existing file."""
    path = result_path(settings, result)
    if settings.result_dir:
        os.makedirs(settings.result_dir, exist_ok=True)
    mode = "a" if settings.append_result else "w"
    with open(path, mode, encoding="utf-8") as handle:
        if settings.append_result and handle.tell() > 0:
            handle.write("\n")
        json.dump(result, handle)
    return path


def run_and_report(settings: BenchSettings) -> int:
    result = asyncio.run(run_bench(settings))
    settings = replace(settings, endpoint=replace(settings.endpoint, model=result["model_id"]))
    print(render_summary(result, settings.percentile_metrics), flush=True)
    if settings.save_result or settings.append_result:
        print("simhost bench: result saved to {}".format(save_result(settings, result)), flush=True)
    return 0
