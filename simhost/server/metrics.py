"""/metrics in vLLM's names and units, through prometheus_client, on a registry of its own.

Counters and gauges are read from the engine at scrape time; latency histograms are observed by
the runtime in wall seconds. Imports prometheus_client (serve only), never aiohttp.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Iterator, List, Sequence, Tuple

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from simhost.engine.batching import Engine

LABELS = ("engine", "model_name")
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
TTFT_BUCKETS: Tuple[float, ...]  # grown below: declared for the whole length
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5)
TTFT_BUCKETS += (5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS: Tuple[float, ...]
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
ITL_BUCKETS += (7.5, 10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS: Tuple[float, ...]
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0)
REQUEST_BUCKETS += (60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
N_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0)
PREEMPTION_BUCKETS = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)


def token_buckets(max_model_len: int) -> List[float]:
    """vLLM's 1-2-5 series up to the context length."""
    buckets: List[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return buckets
            buckets.append(float(value))
        exponent += 1


class _LeakyProcessCollector:
    """process_* series of this process, with the memory-growth fault added to the RSS."""

    def __init__(self, leaked_bytes: Callable[[], int]) -> None:
        self._inner = ProcessCollector(registry=None)
        self._leaked_bytes = leaked_bytes

    def collect(self) -> Iterator[Metric]:
        for family in self._inner.collect():
            if family.name == "process_resident_memory_bytes":
                extra = self._leaked_bytes()
                family.samples = [s._replace(value=s.value + extra) for s in family.samples]
            yield family


class _EngineCollector:
    """Counters and gauges straight from the engine's state."""

    def __init__(self, server: "ServerMetrics") -> None:
        self._server = server

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=LABELS)
        family.add_metric(self._server.label_values, value, created=self._server.created)
        return family

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=LABELS)
        family.add_metric(self._server.label_values, value)
        return family

    def collect(self) -> Iterator[Metric]:
        yield from self._scheduler_gauges()
        yield from self._cache_counters()
        yield from self._outcome_counters()
        yield self._server.cache_config_info()
        if self._server.engine.tier is not None:
            yield from self._offload_series()
        yield self._http_requests()

    def _http_requests(self) -> CounterMetricFamily:
        family = CounterMetricFamily(
            "http_requests",
            "Total number of requests by method, status and handler.",
            labels=("handler", "method", "status"),
        )
        for labels, count in sorted(self._server.http_requests.items()):
            family.add_metric(list(labels), count, created=self._server.created)
        return family

    def _scheduler_gauges(self) -> Iterator[Metric]:
        engine = self._server.engine
        running = len(engine.running)
        waiting = len(engine.waiting)
        yield self._gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", running
        )
        yield self._gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting
        )
        by_reason = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason.",
            labels=(*LABELS, "reason"),
        )
        by_reason.add_metric([*self._server.label_values, "capacity"], waiting)
        by_reason.add_metric([*self._server.label_values, "deferred"], 0)
        yield by_reason
        yield self._gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            engine.pool.usage(),
        )

    def _cache_counters(self) -> Iterator[Metric]:
        stats = self._server.engine.stats
        prefix = "Prefix cache {}, in terms of number of {} tokens."
        external = "External prefix cache {} from KV connector cross-instance cache sharing, " + (
            "in terms of number of {} tokens."
        )
        yield self._counter(
            "vllm:prefix_cache_queries", prefix.format("queries", "queried"), stats.prefix_queries
        )
        yield self._counter(
            "vllm:prefix_cache_hits", prefix.format("hits", "cached"), stats.prefix_hits
        )
        yield self._counter(
            "vllm:external_prefix_cache_queries",
            external.format("queries", "queried"),
            stats.external_queries,
        )
        yield self._counter(
            "vllm:external_prefix_cache_hits",
            external.format("hits", "cached"),
            stats.external_hits,
        )
        yield self._by_source(stats.prompt_tokens, stats.prefix_hits, stats.external_hits)
        yield self._counter(
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
            stats.prefix_hits + stats.external_hits,
        )
        yield self._cached_by_source(stats.prefix_hits, stats.external_hits)
        # No multimodal inputs and no admission control here: true zeros, as vLLM shows them.
        for name, doc in (
            ("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of items."),
            ("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of items."),
            ("vllm:admission_rejections", "Requests rejected by admission control."),
        ):
            yield self._counter(name, doc, 0)
        sleep = GaugeMetricFamily(
            "vllm:engine_sleep_state", "Engine sleep state", labels=(*LABELS, "sleep_state")
        )
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep.add_metric([*self._server.label_values, state], value)
        yield sleep

    def _cached_by_source(self, device: int, host: int) -> CounterMetricFamily:
        """Cached prompt tokens by where they were found: GPU (device) or the CPU tier (host)."""
        family = CounterMetricFamily(
            "vllm:prompt_tokens_cached_by_source",
            "Number of cached prompt tokens by source.",
            labels=(*LABELS, "source"),
        )
        sources = (("device", device), ("host", host), ("p2p", 0), ("disk", 0))
        for source, value in (*sources, ("external_unspecified", 0)):
            family.add_metric(
                [*self._server.label_values, source], value, created=self._server.created
            )
        return family

    def _by_source(self, prompt: int, local: int, external: int) -> CounterMetricFamily:
        family = CounterMetricFamily(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            labels=(*LABELS, "source"),
        )
        computed = max(0, prompt - local - external)
        for source, value in (
            ("local_compute", computed),
            ("local_cache_hit", local),
            ("external_kv_transfer", external),
        ):
            family.add_metric(
                [*self._server.label_values, source], value, created=self._server.created
            )
        return family

    def _outcome_counters(self) -> Iterator[Metric]:
        stats = self._server.engine.stats
        yield self._counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            stats.preemptions,
        )
        yield self._counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens
        )
        yield self._counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            stats.generation_tokens,
        )
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=("engine", "finished_reason", "model_name"),
        )
        engine_label, model_label = self._server.label_values
        for reason in FINISH_REASONS:
            count = self._server.finished.get(reason, 0)
            success.add_metric(
                [engine_label, reason, model_label], count, created=self._server.created
            )
        yield success

    def _offload_series(self) -> Iterator[Metric]:
        stats = self._server.engine.stats
        for name, doc, values in (
            (
                "vllm:kv_offload_total_bytes",
                "Bytes moved by KV offloading.",
                (stats.store_bytes, stats.load_bytes),
            ),
            (
                "vllm:kv_offload_total_time",
                "Seconds spent moving KV.",
                (stats.store_seconds, stats.load_seconds),
            ),
        ):
            family = CounterMetricFamily(name, doc, labels=(*LABELS, "transfer_type"))
            for transfer, value in zip(("GPU_to_CPU", "CPU_to_GPU"), values):  # noqa: B905
                family.add_metric(
                    [*self._server.label_values, transfer], value, created=self._server.created
                )
            yield family
        yield self._counter(
            "vllm:kv_offload_store_bytes", "Bytes stored to the CPU tier.", stats.store_bytes
        )
        yield self._counter(
            "vllm:kv_offload_load_bytes", "Bytes loaded from the CPU tier.", stats.load_bytes
        )
        tier = self._server.engine.tier
        assert tier is not None  # the offload series are collected only with a tier
        yield self._gauge(
            "vllm:kv_offload_cpu_cache_usage_perc", "CPU KV tier usage fraction.", tier.usage()
        )


class ServerMetrics:
    """Everything /metrics shows for one emulated server."""

    # latency histograms (wall seconds) and per-request token histograms, labelled children
    ttft: Histogram
    itl: Histogram
    tpot: Histogram
    e2e: Histogram
    queue: Histogram
    prompt_tokens: Histogram
    generation_tokens: Histogram
    computed_tokens: Histogram
    prefill: Histogram
    decode: Histogram
    inference: Histogram
    max_generation: Histogram
    params_n: Histogram
    params_max_tokens: Histogram
    request_preemptions: Histogram

    def __init__(
        self,
        engine: Engine,
        model_name: str,
        cache_labels: Dict[str, str],
        leaked_bytes: Callable[[], int],
    ) -> None:
        self.engine = engine
        self.label_values = ["0", model_name]
        self.created = time.time()
        self.finished: Dict[str, int] = {}
        self.http_requests: Dict[Tuple[str, str, str], int] = {}
        self._cache_labels = cache_labels
        self.registry = CollectorRegistry(auto_describe=False)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(_LeakyProcessCollector(leaked_bytes))
        self.registry.register(_EngineCollector(self))
        self._build_histograms(engine.config.preset.max_model_len)

    def _histogram(self, name: str, doc: str, buckets: Sequence[float]) -> Histogram:
        metric = Histogram(name, doc, LABELS, buckets=buckets, registry=self.registry)
        return metric.labels(*self.label_values)

    def _build_histograms(self, max_model_len: int) -> None:
        tokens = token_buckets(max_model_len)
        for attribute, name, doc, buckets in (
            (
                "ttft",
                "time_to_first_token_seconds",
                "time to first token in seconds.",
                TTFT_BUCKETS,
            ),
            ("itl", "inter_token_latency_seconds", "inter-token latency in seconds.", ITL_BUCKETS),
            (
                "tpot",
                "request_time_per_output_token_seconds",
                "time per output token per request.",
                ITL_BUCKETS,
            ),
            (
                "e2e",
                "e2e_request_latency_seconds",
                "e2e request latency in seconds.",
                REQUEST_BUCKETS,
            ),
            (
                "queue",
                "request_queue_time_seconds",
                "time spent in WAITING phase for request.",
                REQUEST_BUCKETS,
            ),
            (
                "prompt_tokens",
                "request_prompt_tokens",
                "prefill tokens processed per request.",
                tokens,
            ),
            (
                "generation_tokens",
                "request_generation_tokens",
                "generation tokens per request.",
                tokens,
            ),
            (
                "computed_tokens",
                "request_prefill_kv_computed_tokens",
                "new KV tokens computed in prefill.",
                tokens,
            ),
            ("prefill", "request_prefill_time_seconds", "time in PREFILL phase.", REQUEST_BUCKETS),
            ("decode", "request_decode_time_seconds", "time in DECODE phase.", REQUEST_BUCKETS),
            (
                "inference",
                "request_inference_time_seconds",
                "time in RUNNING phase for request.",
                REQUEST_BUCKETS,
            ),
            (
                "max_generation",
                "request_max_num_generation_tokens",
                "maximum number of requested generation tokens.",
                tokens,
            ),
            ("params_n", "request_params_n", "the n request parameter.", N_BUCKETS),
            (
                "params_max_tokens",
                "request_params_max_tokens",
                "the max_tokens request parameter.",
                tokens,
            ),
            (
                "request_preemptions",
                "request_num_preemptions",
                "number of preemptions per request.",
                PREEMPTION_BUCKETS,
            ),
        ):
            setattr(
                self, attribute, self._histogram("vllm:" + name, "Histogram of " + doc, buckets)
            )

    def cache_config_info(self) -> GaugeMetricFamily:
        names = sorted(self._cache_labels)
        family = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=names
        )
        family.add_metric([self._cache_labels[n] for n in names], 1.0)
        return family

    def count_finished(self, reason: str) -> None:
        self.finished[reason] = self.finished.get(reason, 0) + 1

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
