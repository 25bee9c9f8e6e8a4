"""Dynamo KVBM inside `simhost serve`: with `--kv-transfer-config` naming DynamoConnector, the
emulated tier is KVBM's host tier, sized by DYN_KVBM_CPU_CACHE_GB as KVBM sizes it, and with
DYN_KVBM_METRICS=true the server answers KVBM's `kvbm_*` series on DYN_KVBM_METRICS_PORT (6880 by
default), beside vLLM's own /metrics, as the real connector does inside vLLM's process.

The series (kvbm 1.6.1's names) are what the emulated tier did: tokens it matched
(`kvbm_matched_tokens`), blocks offloaded device to host (`kvbm_offload_blocks_d2h`) and onboarded
host to device (`kvbm_onboard_blocks_h2d`), and its host hit rate since start
(`kvbm_host_cache_hit_rate`, hits over the tokens looked up); no disk or object tier (0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

if TYPE_CHECKING:  # serve only
    from aiohttp import web

    from simhost.server.app import SimServer

CONNECTOR = "DynamoConnector"
DEFAULT_METRICS_PORT = 6880


class KvbmError(ValueError):
    """A KVBM environment value that cannot be served; the message names it."""


def kvbm_values(values: Dict[str, Any], environ: Mapping[str, str]) -> Optional[int]:
    """For a DynamoConnector, the tier size from DYN_KVBM_CPU_CACHE_GB into `values`, and the
    metrics port when DYN_KVBM_METRICS is on (else None)."""
    if (values.get("kv_transfer_config") or {}).get("kv_connector") != CONNECTOR:
        return None
    try:
        size = float(environ.get("DYN_KVBM_CPU_CACHE_GB", ""))
    except ValueError:
        raise KvbmError("DYN_KVBM_CPU_CACHE_GB: KVBM's host tier in GB, a number > 0") from None
    if size <= 0:
        raise KvbmError("DYN_KVBM_CPU_CACHE_GB: KVBM's host tier in GB, a number > 0")
    values["kv_offloading_size"] = size * 1e9 / (1 << 30)
    if environ.get("DYN_KVBM_METRICS", "").lower() not in ("1", "true"):
        return None
    port = environ.get("DYN_KVBM_METRICS_PORT", str(DEFAULT_METRICS_PORT))
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise KvbmError("DYN_KVBM_METRICS_PORT: a TCP port from 1 to 65535")
    return int(port)


def kvbm_page(server: "SimServer") -> str:
    stats, config = server.engine.stats, server.engine.config
    blocks = max(config.block_bytes, 1)
    asked = stats.external_queries
    series = (
        ("kvbm_matched_tokens", "counter", stats.external_hits),
        ("kvbm_offload_blocks_d2h", "counter", stats.store_bytes // blocks),
        ("kvbm_offload_blocks_h2d", "counter", 0),
        ("kvbm_offload_blocks_d2d", "counter", 0),
        ("kvbm_onboard_blocks_h2d", "counter", stats.load_bytes // blocks),
        ("kvbm_onboard_blocks_d2d", "counter", 0),
        ("kvbm_host_cache_hit_rate", "gauge", stats.external_hits / asked if asked else 0.0),
        ("kvbm_disk_cache_hit_rate", "gauge", 0.0),
    )
    lines = []
    for name, kind, value in series:
        lines += ["# HELP {} KVBM {}".format(name, name[5:]), "# TYPE {} {}".format(name, kind)]
        lines.append("{} {}".format(name, value))
    return "\n".join(lines) + "\n"


async def start_kvbm_metrics(server: "SimServer") -> "Optional[web.AppRunner]":
    """KVBM's metrics endpoint on its own port, when the settings name one."""
    port = server.settings.kvbm_metrics_port
    if port is None:
        return None
    from aiohttp import web

    async def metrics(request: "web.Request") -> "web.Response":
        return web.Response(text=kvbm_page(server), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, server.settings.host, port).start()
    return runner
