"""`simhost lmcache-server`: a TEST DOUBLE of LMCache's multi-process server's HTTP frontend,
the side service the vLLM profiles start before vLLM when `offload_backend` is `lmcache`.

It takes `lmcache server`'s flags (lmcache 0.5.6: `--host`, `--port`, `--l1-size-gb`,
`--eviction-policy`, `--chunk-size`, `--http-host`, `--http-port`, `--prometheus-port`; all but
the HTTP ones are accepted and unused, `--prometheus-port` too: the real server, run with its
HTTP frontend, opens no Prometheus port) and serves on its HTTP port what the real one does
there for Tollgate: `/healthcheck` (`{"status":"healthy"}`) and `/metrics`; any other path,
the quickstart's `/api/healthcheck` among them, is FastAPI's 404 (`{"detail":"Not Found"}`;
the real server's other routes, `/`, `/status`, `/version` and its admin APIs, are left out).

The page is shaped as 0.5.6 prints it (tests/fixtures/lmcache-metrics/, the real captures):
the event bus gauges always, and the lookup counters
(`lmcache_mp_lookup_{requested,hit,hit_l1,hit_l2}_tokens_total`, the real HELP texts) only once
something was looked up (OpenTelemetry exports a counter once it was added to). simhost has
one offload tier and it lives inside the emulated engine, so what this server counts is what
that tier saw: at every scrape it reads the engine's `/metrics` and reports its external prefix
cache queries as tokens looked up and its hits as tokens hit, all of them in L1 (the emulated
tier is one level of host memory; L2 stays 0). An engine not answering yet has looked nothing
up. No key-value store runs here. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
import urllib.request
from http.server import ThreadingHTTPServer
from typing import Dict, List

from simhost.sidehttp import SideServiceHandler

QUERIES = "vllm:external_prefix_cache_queries_total"
HITS = "vllm:external_prefix_cache_hits_total"
READ_TIMEOUT_S = 5


def engine_counters(page: str) -> Dict[str, float]:
    """The engine's external prefix cache counters, summed over their label sets."""
    found = {QUERIES: 0.0, HITS: 0.0}
    for line in page.splitlines():
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        if name in found:
            found[name] += float(line.rsplit(" ", 1)[1])
    return found


# lmcache 0.5.6's own HELP texts (its lookup metrics subscriber and event bus).
EVENT_BUS = (
    ("event_bus_queue_depth", "Events currently queued in the EventBus."),
    (
        "event_bus_drain_lag_seconds",
        "Seconds since the oldest queued event was published; 0.0 when empty.  "
        "Rising values mean the drain thread is falling behind.",
    ),
)
LOOKUP_HELP = {
    "lookup_requested_tokens": "Total tokens submitted for lookup (denominator of the L1+L2 "
    "token-level hit rate). Only chunk-aligned tokens are counted.",
    "lookup_hit_tokens": "Total tokens found in L1+L2 during lookup (numerator of the L1+L2 "
    "token-level hit rate). Counts the contiguous prefix hit only.",
    "lookup_hit_l1_tokens": "Of lookup_hit: tokens served from objects L1 already held (from "
    "the storage manager's per-tier hit counts).",
    "lookup_hit_l2_tokens": "Of lookup_hit: tokens L2 added beyond the L1-servable prefix. "
    "lookup_hit_l1 + lookup_hit_l2 == lookup_hit.",
}


def lmcache_page(counters: Dict[str, float]) -> str:
    """LMCache's page for what the engine's tier looked up and hit: the event bus gauges, and
    the lookup counters once anything was looked up."""
    lines = []
    for name, doc in EVENT_BUS:
        full = "lmcache_mp_{}".format(name)
        lines += ["# HELP {} {}".format(full, doc), "# TYPE {} gauge".format(full)]
        lines.append("{} 0.0".format(full))
    # OpenTelemetry exports a counter only once something was added to it.
    if counters[QUERIES] > 0:
        lines += lookup_lines(counters[QUERIES], counters[HITS])
    return "\n".join(lines) + "\n"


def lookup_lines(asked: float, hit: float) -> List[str]:
    values = {
        "lookup_requested_tokens": asked,
        "lookup_hit_tokens": hit,
        "lookup_hit_l1_tokens": hit,
        "lookup_hit_l2_tokens": 0.0,
    }
    lines = []
    for name, value in values.items():
        full = "lmcache_mp_{}_total".format(name)
        lines += ["# HELP {} {}".format(full, LOOKUP_HELP[name]), "# TYPE {} counter".format(full)]
        lines.append("{} {}".format(full, value))
    return lines


def read_engine(url: str) -> Dict[str, float]:
    try:
        # An http:// URL only: serve() refuses any other.
        with urllib.request.urlopen(url, timeout=READ_TIMEOUT_S) as answer:  # noqa: S310
            return engine_counters(answer.read().decode("utf-8", "replace"))
    except OSError:
        return {QUERIES: 0.0, HITS: 0.0}


def handler_for(engine_metrics_url: str) -> type:
    class Handler(SideServiceHandler):
        def do_GET(self) -> None:
            if self.path == "/healthcheck":
                self.answer(200, "application/json", b'{"status":"healthy"}')
            elif self.path == "/metrics":
                page = lmcache_page(read_engine(engine_metrics_url))
                self.answer(200, "text/plain; charset=utf-8", page.encode())
            else:
                self.answer(404, "application/json", b'{"detail":"Not Found"}')

    return Handler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http-host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument(
        "--prometheus-port", type=int, help="(unused: /metrics is on --http-port, as LMCache's)"
    )
    # lmcache server's own flags, taken as it takes them: simhost's tier lives in the engine.
    parser.add_argument("--host", default="localhost", help="ZMQ host (unused)")
    parser.add_argument("--port", type=int, default=5555, help="ZMQ port (unused)")
    parser.add_argument("--l1-size-gb", type=float, help="L1 size (unused)")
    parser.add_argument("--eviction-policy", default="LRU", help="(unused)")
    parser.add_argument("--chunk-size", type=int, default=256, help="(unused)")
    parser.add_argument("--engine-metrics-url", required=True, help="the engine's /metrics")


def serve(args: argparse.Namespace) -> int:
    if not args.engine_metrics_url.startswith("http://"):
        print("simhost lmcache-server: --engine-metrics-url must be http://", file=sys.stderr)
        return 2
    handler = handler_for(args.engine_metrics_url)
    server = ThreadingHTTPServer((args.http_host, args.http_port), handler)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
