"""`simhost mooncake-master`: a TEST DOUBLE of the Mooncake store's master (`mooncake_master`)
with its co-located HTTP metadata server, the side service the Mooncake profiles start on the
offload arm before the engine.

It takes the master's gflags as the Mooncake profiles pass them (`--rpc_port`, `--port`,
`--metrics_port`, `--metrics_host`, `--enable_http_metadata_server`,
`--http_metadata_server_host`, `--http_metadata_server_port`; gflags' `--flag=value` and
`--flag value` both) and serves what a real 0.3.13.post1 master serves on them: on the metrics
port `/health` (JSON, `"service_ready": true`) and `/metrics` (`master_*` series); on the
metadata port `/health` (`OK`) and `/metadata?key=K` (GET, PUT, DELETE of a key-value store, as
the transfer engine uses it). No RPC server and no store run here: simhost's offload tier lives
in the emulated engine, so at every scrape the master's counters are what that tier saw, read
off the engine's `/metrics` (vLLM's external prefix cache counters, or SGLang's cached tokens
from host or storage): tokens looked up as `master_batch_exist_key_items_total`, tokens hit as
`master_batch_get_replica_list_items_total`, tokens missed (then stored) as
`master_batch_put_start_items_total` and `master_key_count`. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import urllib.request
from http.server import ThreadingHTTPServer
from typing import Dict, Tuple
from urllib.parse import parse_qs, urlsplit

from simhost.sidehttp import SideServiceHandler

READ_TIMEOUT_S = 5
VLLM = ("vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total")


def engine_tokens(page: str) -> Tuple[float, float]:
    """(tokens looked up in the tier, tokens it served) from a vLLM or SGLang /metrics page."""
    asked = hit = prompt = device = 0.0
    for line in page.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        value = float(line.rsplit(" ", 1)[1])
        if name == VLLM[0]:
            asked += value
        elif name == VLLM[1]:
            hit += value
        elif name == "sglang:prompt_tokens_total":
            prompt += value
        elif name == "sglang:cached_tokens_total":
            if 'cache_source="device"' in line:
                device += value
            else:
                hit += value
    if prompt:  # SGLang: what the GPU did not hold was looked up below it
        asked += prompt - device
    return asked, hit


def master_page(asked: float, hit: float) -> str:
    missed = max(asked - hit, 0.0)
    series = (
        ("master_key_count", "gauge", "Total number of keys managed by the master", missed),
        ("master_allocated_bytes", "gauge", "Total memory bytes currently allocated", 0.0),
        ("master_active_clients", "gauge", "Total number of active clients", 1.0),
        ("master_batch_exist_key_items_total", "counter", "Items in BatchExistKey", asked),
        ("master_batch_get_replica_list_items_total", "counter", "Items in BatchGet", hit),
        ("master_batch_put_start_items_total", "counter", "Items in BatchPutStart", missed),
    )
    lines = []
    for name, kind, doc, value in series:
        lines += ["# HELP {} {}".format(name, doc), "# TYPE {} {}".format(name, kind)]
        lines.append("{} {}".format(name, int(value)))
    return "\n".join(lines) + "\n"


def read_engine(url: str) -> Tuple[float, float]:
    try:
        # An http:// URL only: serve() refuses any other.
        with urllib.request.urlopen(url, timeout=READ_TIMEOUT_S) as answer:  # noqa: S310
            return engine_tokens(answer.read().decode("utf-8", "replace"))
    except OSError:
        return 0.0, 0.0


def handler_for(engine_metrics_url: str, store: Dict[str, bytes], *, admin: bool) -> type:
    """The master's admin and metrics server (`admin`), or its HTTP metadata server."""

    class Handler(SideServiceHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/health" and admin:
                body = {"status": "ok", "role": "leader", "service_ready": True}
                self.answer(200, "application/json", json.dumps(body).encode())
            elif path == "/health":
                self.answer(200, "text/plain", b"OK")
            elif path == "/metrics":
                page = master_page(*read_engine(engine_metrics_url))
                self.answer(200, "text/plain; version=0.0.4", page.encode())
            elif path == "/metadata":
                value = store.get(self._key())
                if value is None:
                    self.answer(404, "application/json", b"metadata not found")
                else:
                    self.answer(200, "application/json", value)
            else:
                self.answer(404, "text/plain", b"not found\n")

        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            store[self._key()] = self.rfile.read(length)
            self.answer(200, "application/json", b"metadata updated")

        def do_DELETE(self) -> None:
            store.pop(self._key(), None)
            self.answer(200, "application/json", b"metadata deleted")

        def _key(self) -> str:
            return (parse_qs(urlsplit(self.path).query).get("key") or [""])[0]

    return Handler


def _flag(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError("must be true or false")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rpc_port", type=int, default=0, help="RPC port (unused)")
    parser.add_argument("--port", type=int, default=50051, help="RPC port, deprecated (unused)")
    parser.add_argument("--metrics_port", type=int, default=9003)
    parser.add_argument("--metrics_host", default="127.0.0.1", help="(the real default: 0.0.0.0)")
    parser.add_argument(
        "--enable_http_metadata_server", type=_flag, nargs="?", const=True, default=False
    )
    parser.add_argument("--http_metadata_server_host", default="127.0.0.1")
    parser.add_argument("--http_metadata_server_port", type=int, default=8080)
    parser.add_argument("--engine-metrics-url", required=True, help="the engine's /metrics")


def serve(args: argparse.Namespace) -> int:
    if not args.engine_metrics_url.startswith("http://"):
        print("simhost mooncake-master: --engine-metrics-url must be http://", file=sys.stderr)
        return 2
    store: Dict[str, bytes] = {}
    admin = handler_for(args.engine_metrics_url, store, admin=True)
    metrics = ThreadingHTTPServer((args.metrics_host, args.metrics_port), admin)
    if args.enable_http_metadata_server:
        address = (args.http_metadata_server_host, args.http_metadata_server_port)
        metadata = ThreadingHTTPServer(address, handler_for("", store, admin=False))
        threading.Thread(target=metadata.serve_forever, daemon=True).start()
    try:
        metrics.serve_forever()
    finally:
        metrics.server_close()
    return 0
