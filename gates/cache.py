"""The shared cache (Redis) as an optimization only: a read that fails is a miss, a write that
fails is skipped, and an outage is logged once, never raised. Every cache use outside the rate
limits (gates/api/rest/throttling.py keeps its own per-process fallback) goes through here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache

logger = logging.getLogger(__name__)
T = TypeVar("T")
# After a failure the cache is left alone this long: a partitioned Redis costs its socket
# timeout once per interval, not once per read on every page.
RETRY_AFTER_S = 10.0


class _Outage:
    """Whether the cache is being skipped, and until when (per process)."""

    down_until = 0.0
    warned = False


def cache_get_or_compute(key: str, compute: Callable[[], T], *, timeout: float) -> T:
    """The cached value under `key`, else `compute()` stored for `timeout` seconds. `compute`
    must never return None (None is the cache's miss)."""
    found = cache_get(key)
    if found is not None:
        return found
    value = compute()
    cache_set(key, value, timeout=timeout)
    return value


def cache_get(key: str) -> Any:
    """The cached value, or None when absent or the cache cannot be read."""
    return _attempt(lambda: cache.get(key))


def cache_set(key: str, value: Any, *, timeout: float) -> None:
    _attempt(lambda: cache.set(key, value, timeout))


def cache_degraded() -> bool:
    return time.monotonic() < _Outage.down_until


def _attempt(call: Callable[[], Any]) -> Any:
    if cache_degraded():
        return None
    try:
        found = call()
    # Any failure, not only RedisError: a refused socket, a timeout, a value pickled by an
    # older release; the caller computes from the database either way.
    except Exception as error:
        _Outage.down_until = time.monotonic() + RETRY_AFTER_S
        if not _Outage.warned:
            logger.warning("cache unreachable (%r): reading from the database instead", error)
            _Outage.warned = True
        return None
    if _Outage.warned:
        logger.info("cache reachable again")
        _Outage.warned = False
    return found
