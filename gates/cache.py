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


class CacheOutage:
    """Whether a shared cache is being skipped after a failure, and until when (per process).
    The one rule for this module and the rate limits' fallback (gates/api/rest/throttling.py)."""

    def __init__(self, retry_after_s: float = RETRY_AFTER_S) -> None:
        self.retry_after_s = retry_after_s
        self.down_until = 0.0
        self.warned = False

    @property
    def active(self) -> bool:
        return time.monotonic() < self.down_until

    def begin(self) -> None:
        self.down_until = time.monotonic() + self.retry_after_s

    def end(self) -> None:
        self.down_until = 0.0


_OUTAGE = CacheOutage()


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
    return _OUTAGE.active


def _attempt(call: Callable[[], Any]) -> Any:
    if cache_degraded():
        return None
    try:
        found = call()
    # Any failure, not only RedisError: a refused socket, a timeout, a value pickled by an
    # older release; the caller computes from the database either way.
    except Exception as error:
        _OUTAGE.begin()
        if not _OUTAGE.warned:
            logger.warning("cache unreachable (%r): reading from the database instead", error)
            _OUTAGE.warned = True
        return None
    if _OUTAGE.warned:
        logger.info("cache reachable again")
        _OUTAGE.warned = False
    return found
