"""API rate limits that survive a cache outage: DRF's per-user throttle and the limit on failed
token authentications, kept in the shared cache (Redis) and, while it cannot be reached, in
this process's own memory with a logged warning (degraded, never a 500).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from redis.exceptions import RedisError
from rest_framework import throttling
from rest_framework.settings import api_settings

from gates.cache import CacheOutage

logger = logging.getLogger(__name__)
# After a failure the shared cache is tried again this much later, so an outage costs one
# connection attempt per process per interval, not one per request.
RETRY_SHARED_AFTER_S = 10.0


class FallbackCache:
    """The shared cache, or this process's own while the shared one is unreachable."""

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias
        self.local = LocMemCache(f"tollgate-fallback-{alias}", {})
        self.outage = CacheOutage(RETRY_SHARED_AFTER_S)

    def get(self, key: str, default: Any = None) -> Any:
        return self._call("get", key, default)

    def set(self, key: str, value: Any, timeout: float | None) -> None:
        self._call("set", key, value, timeout)

    def add(self, key: str, value: Any, timeout: float | None) -> bool:
        return self._call("add", key, value, timeout)

    def incr(self, key: str) -> int:
        return self._call("incr", key)

    @property
    def degraded(self) -> bool:
        return self.outage.active

    def _call(self, method: str, *args: Any) -> Any:
        if not self.degraded:
            try:
                return getattr(caches[self.alias], method)(*args)
            except (RedisError, OSError) as error:
                self.outage.begin()
                logger.warning(
                    "cache %r unreachable (%s): rate limits are per process for %.0f s",
                    self.alias,
                    error,
                    RETRY_SHARED_AFTER_S,
                )
        return getattr(self.local, method)(*args)


LIMITS_CACHE = FallbackCache()


class UserRateThrottle(throttling.UserRateThrottle):
    """DRF's per-user rate, kept in LIMITS_CACHE; the rate is read when a request comes (so a
    changed setting applies without a restart of the class)."""

    cache = LIMITS_CACHE

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


def token_failures_exceeded(address: str) -> bool:
    return _failures(address) >= settings.TOLLGATE_TOKEN_FAILURES_ALLOWED


def count_in_window(key: str, window_s: float) -> int:
    """Count one more event under `key` in LIMITS_CACHE; returns the count in its window
    (which opens with the first event and lasts `window_s`)."""
    if LIMITS_CACHE.add(key, 1, window_s):
        return 1
    try:
        return LIMITS_CACHE.incr(key)  # atomic in Redis: parallel events all count
    except ValueError:  # the window ended between add and incr
        LIMITS_CACHE.set(key, 1, window_s)
        return 1


def token_failure_record(address: str) -> int:
    """Count one failed token authentication from `address`; returns the count in the window."""
    return count_in_window(_failure_key(address), settings.TOLLGATE_TOKEN_FAILURE_WINDOW_S)


def _failures(address: str) -> int:
    return int(LIMITS_CACHE.get(_failure_key(address), 0))


def _failure_key(address: str) -> str:
    return f"token_failures_{address}"
