"""simhost's SGLang personality: `simhost launch_server` takes `python -m sglang.launch_server`'s
flags (HiCache's among them) and serves the same engine under SGLang's names: /health,
/get_model_info, /get_server_info and a /metrics page of `sglang:` series.

The flags are translated into `simhost serve`'s; argument handling is pure (argparse only), the
metrics page imports prometheus_client and the routes aiohttp, when serving.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Dict, Iterator, List

from simhost.engine.batching import GIB
from simhost.host.config import HostConfig
from simhost.server.args import (
    UsageError,
    _add_emulation_arguments,
    _add_fault_arguments,
    _preset,
    _with_scenario,
)

if TYPE_CHECKING:  # serve only
    from aiohttp import web
    from prometheus_client.metrics_core import Metric

    from simhost.server.app import SimServer

WRITE_POLICIES = ("write_through", "write_through_selective", "write_back")
STORAGE_BACKENDS = ("file", "mooncake", "hf3fs", "nixl", "aibrix", "dynamic")


def _json_object(text: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError("not JSON: {}".format(error)) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def add_launch_server_arguments(parser: argparse.ArgumentParser) -> None:
    """SGLang's spellings of what simhost emulates; the rest of its flags are not accepted."""
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--served-model-name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--tp-size", "--tp", type=int, default=1, help="accepted; the preset's")
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--mem-fraction-static", type=float, default=0.9)
    parser.add_argument("--page-size", type=int, choices=[8, 16, 32, 64, 128])
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--enable-cache-report", action="store_true")
    parser.add_argument("--disable-radix-cache", action="store_true")
    group = parser.add_argument_group("HiCache")
    group.add_argument("--enable-hierarchical-cache", action="store_true")
    group.add_argument("--hicache-ratio", type=float, default=2.0)
    group.add_argument("--hicache-size", type=float, default=0.0, metavar="GB")
    group.add_argument("--hicache-write-policy", choices=WRITE_POLICIES, default="write_through")
    group.add_argument("--hicache-storage-backend", choices=STORAGE_BACKENDS)
    group.add_argument(
        "--hicache-storage-backend-extra-config",
        type=_json_object,
        metavar="JSON",
        help="accepted (the storage tier is the emulated host tier)",
    )
    _add_emulation_arguments(parser)
    _add_fault_arguments(parser)
    parser.add_argument("--num-gpu-blocks-override", type=int, help="simhost only")


def serve_namespace(args: argparse.Namespace, host: HostConfig) -> argparse.Namespace:
    """The `simhost serve` arguments these SGLang flags mean (serve_settings reads them)."""
    if args.enable_hierarchical_cache and args.disable_radix_cache:
        raise UsageError(
            "--enable-hierarchical-cache needs the radix cache (not with --disable-radix-cache)"
        )
    values: Dict[str, Any] = dict(vars(args))
    values.update(
        model=args.model_path,
        served_model_name=[args.served_model_name or args.model_path],
        enable_prefix_caching=not args.disable_radix_cache,
        kv_offloading_size=None,
        kv_offloading_backend="native",
        block_size=args.page_size,
        max_model_len=args.context_length,
        max_num_batched_tokens=None,
        max_num_seqs=None,
        gpu_memory_utilization=args.mem_fraction_static,
        personality="sglang",
    )
    if args.enable_hierarchical_cache:
        values["kv_offloading_size"] = _host_pool_gib(args, values, host)
    return argparse.Namespace(**values)


def _host_pool_gib(args: argparse.Namespace, values: Dict[str, Any], host: HostConfig) -> float:
    """HiCache's host pool: --hicache-size GB when given (it overrides the ratio), else
    --hicache-ratio times the GPU pool, which must be more than 1 (SGLang refuses less)."""
    if args.hicache_size > 0:
        return float(args.hicache_size) * 1e9 / GIB
    if args.hicache_ratio <= 1:
        raise UsageError("--hicache-ratio: must be > 1 (the host pool holds the GPU pool)")
    scenario = _with_scenario(argparse.Namespace(**values))
    preset = _preset(scenario, host)
    blocks = scenario.get("num_gpu_blocks_override") or preset.num_gpu_blocks
    block_size = scenario.get("block_size") or preset.block_size
    return float(args.hicache_ratio * blocks * block_size * preset.kv_bytes_per_token / GIB)


def add_personality_routes(app: "web.Application", server: "SimServer") -> None:
    """/metrics in the emulated engine's names; for SGLang also its model and server info."""
    from aiohttp import web

    settings = server.settings
    sglang = settings.personality == "sglang"

    async def metrics(_: web.Request) -> web.Response:
        body = sglang_exposition(server) if sglang else server.metrics.exposition()
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    app.router.add_get("/metrics", metrics)
    if not sglang:
        return

    async def model_info(_: web.Request) -> web.Response:
        return web.json_response(
            {"model_path": settings.served_model_names[0], "is_generation": True}
        )

    async def server_info(_: web.Request) -> web.Response:
        engine = settings.engine
        return web.json_response(
            {
                "version": "simhost",
                "max_total_num_tokens": engine.num_gpu_blocks * engine.block_size,
                "page_size": engine.block_size,
                "disable_radix_cache": not engine.enable_prefix_caching,
                "enable_hierarchical_cache": engine.offload_enabled,
            }
        )

    app.router.add_get("/get_model_info", model_info)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_get("/server_info", server_info)


def sglang_exposition(server: "SimServer") -> bytes:
    """The engine's state under SGLang's metric names (sglang 0.5's metrics_collector)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SglangCollector(server))
    return generate_latest(registry)


class _SglangCollector:
    def __init__(self, server: "SimServer") -> None:
        self._server = server
        self._labels = {"model_name": server.settings.served_model_names[0], "tp_rank": "0"}

    def collect(self) -> Iterator["Metric"]:
        from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

        engine = self._server.engine
        stats = engine.stats
        names = list(self._labels)
        values = list(self._labels.values())

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            return family

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            return family

        yield counter(
            "sglang:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens
        )
        yield counter(
            "sglang:generation_tokens",
            "Number of generation tokens processed.",
            stats.generation_tokens,
        )
        yield self._cached_tokens(names, values, stats.prefix_hits, stats.external_hits)
        yield counter(
            "sglang:num_retracted_requests", "Number of retracted requests.", stats.preemptions
        )
        yield gauge(
            "sglang:num_running_reqs", "The number of running requests.", len(engine.running)
        )
        yield gauge(
            "sglang:num_queue_reqs",
            "The number of requests in the waiting queue.",
            len(engine.waiting),
        )
        yield gauge("sglang:token_usage", "The token usage.", engine.pool.usage())
        config = engine.config
        yield gauge(
            "sglang:max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            config.num_gpu_blocks * config.block_size,
        )
        yield gauge("sglang:page_size", "The page size of the KV cache.", config.block_size)
        if engine.tier is not None:
            yield from self._hicache(counter, gauge, engine)

    def _cached_tokens(
        self, names: List[str], values: List[str], device: int, host: int
    ) -> "Metric":
        from prometheus_client.metrics_core import CounterMetricFamily

        family = CounterMetricFamily(
            "sglang:cached_tokens",
            "Number of cached prompt tokens by source (device/host/storage).",
            labels=[*names, "cache_source"],
        )
        # A labelled counter is exported once used: a source with no hit yet is left out.
        for source, value in (("device", device), ("host", host)):
            if value:
                family.add_metric([*values, source], value)
        return family

    def _hicache(self, counter: Any, gauge: Any, engine: Any) -> Iterator["Metric"]:
        stats, block_size = engine.stats, engine.config.block_size
        bytes_per_token = engine.config.preset.kv_bytes_per_token
        yield gauge(
            "sglang:hicache_host_total_tokens",
            "Total capacity of the host KV cache in tokens.",
            engine.tier.capacity_blocks * block_size,
        )
        yield gauge(
            "sglang:hicache_host_used_tokens",
            "Number of tokens currently used in the host KV cache.",
            engine.tier.usage() * engine.tier.capacity_blocks * block_size,
        )
        loaded = stats.load_bytes / bytes_per_token if bytes_per_token else 0
        yield counter(
            "sglang:load_back_tokens",
            "The number of tokens loaded back from local host DRAM (L2) to GPU.",
            loaded,
        )
        yield counter(
            "sglang:backuped_tokens",
            "The number of tokens backed up from GPU to host DRAM.",
            stats.store_bytes / bytes_per_token if bytes_per_token else 0,
        )
