"""`simhost lmcache-server`: a TEST DOUBLE of LMCache's multi-process server's HTTP frontend,
the side service the vLLM profiles start before vLLM when `offload_backend` is `lmcache`.

It takes `lmcache server`'s flags (lmcache 0.5.6: `--host`, `--port`, `--l1-size-gb`,
`--eviction-policy`, `--chunk-size`, `--http-host`, `--http-port`, `--prometheus-port`; all but
the ports are accepted and unused) and serves, on its HTTP port, `/healthcheck` (the route
lmcache 0.5.6's HTTP frontend answers, `{"status": "healthy"}`) and `/api/healthcheck` (the
path LMCache's quickstart documents), and `/metrics` with LMCache's lookup counters
(`lmcache_mp_lookup_{requested,hit,hit_l1,hit_l2}_tokens_total`), on its Prometheus port too
when given (where the real server exports them). simhost has one offload tier
and it lives inside the emulated engine, so what this server counts is what that tier saw: at
every scrape it reads the engine's `/metrics` and reports its external prefix cache queries as
tokens looked up and its hits as tokens hit, all of them in L1 (the emulated tier is one level
of host memory; L2 stays 0). An engine not answering yet has looked nothing up: zeros.
No key-value store runs here. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import urllib.request
from http.server import ThreadingHTTPServer
from typing import Dict

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


def lmcache_page(counters: Dict[str, float]) -> str:
    """LMCache's lookup counters for what the engine's tier looked up and hit."""
    asked, hit = counters[QUERIES], counters[HITS]
    series = (
        ("lookup_requested_tokens", "Tokens looked up in the cache.", asked),
        ("lookup_hit_tokens", "Tokens found in the cache.", hit),
        ("lookup_hit_l1_tokens", "Tokens found in L1 (host memory).", hit),
        ("lookup_hit_l2_tokens", "Tokens found in L2.", 0.0),
    )
    lines = []
    for name, doc, value in series:
        full = "lmcache_mp_{}_total".format(name)
        lines += ["# HELP {} {}".format(full, doc), "# TYPE {} counter".format(full)]
        lines.append("{} {}".format(full, value))
    return "\n".join(lines) + "\n"


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
            if self.path in ("/healthcheck", "/api/healthcheck"):
                self.answer(200, "application/json", b'{"status":"healthy"}')
            elif self.path == "/metrics":
                page = lmcache_page(read_engine(engine_metrics_url))
                self.answer(200, "text/plain; version=0.0.4", page.encode())
            else:
                self.answer(404, "text/plain", b"not found\n")

    return Handler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http-host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--prometheus-port", type=int, help="/metrics here too (LMCache's)")
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
    if args.prometheus_port:
        metrics = ThreadingHTTPServer((args.http_host, args.prometheus_port), handler)
        threading.Thread(target=metrics.serve_forever, daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
