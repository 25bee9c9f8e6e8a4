"""SSH connections kept across tasks of one worker process: the soak collector ticks every
active soak every 30 s, and opening a fresh connection per tick (key exchange and
authentication) costs more than the tick's own work. Imports no Django and no paramiko.

A connection is keyed by its whole SshTarget (address, port, user, pinned host key, private
key, timeouts): a re-pinned host key or a new key is another target, so host-key pinning holds
for every connection ever handed out. A connection is lent to one task at a time (it is not
thread-safe), checked for liveness when lent, closed after IDLE_S unused, and closed instead of
returned when the task using it failed (the next tick reconnects). After a fork (Celery's
prefork pool) the child forgets what it inherited without closing it: the socket is the
parent's, and the paramiko threads serving it did not survive the fork.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from runners.transport.ssh import SshTransport
from runners.transport.types import SshTarget

IDLE_S = 120.0
# Idle connections kept per target: one per concurrent task of the process is the most used.
MAX_IDLE_PER_TARGET = 4


@dataclass
class _Idle:
    transport: SshTransport
    since: float


class ConnectionPool:
    """Idle SSH transports by target, lent out one task at a time."""

    def __init__(
        self,
        *,
        idle_s: float = IDLE_S,
        max_idle_per_target: int = MAX_IDLE_PER_TARGET,
        clock: Callable[[], float] = time.monotonic,
        opener: Callable[[SshTarget], SshTransport] = SshTransport,
    ) -> None:
        self.idle_s = idle_s
        self.max_idle_per_target = max_idle_per_target
        self._clock = clock
        self._opener = opener
        self._idle: dict[SshTarget, list[_Idle]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.opened = 0  # transports created: what the benchmark and the tests count

    @contextmanager
    def lend(self, target: SshTarget) -> Iterator[SshTransport]:
        """A connected-on-demand transport for `target`; returned to the pool when the block
        ends normally, closed when it raised (a half-read channel must not be reused)."""
        transport = self._take(target)
        try:
            yield transport
        except BaseException:
            transport.close()
            raise
        self._give_back(target, transport)

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for entries in idle.values():
            for entry in entries:
                entry.transport.close()

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._idle.values())

    def forget_after_fork(self) -> None:
        """Drop inherited connections unclosed: closing would send the parent's disconnect."""
        self._idle, self._lock, self._pid = {}, threading.Lock(), os.getpid()

    def _take(self, target: SshTarget) -> SshTransport:
        if os.getpid() != self._pid:
            self.forget_after_fork()
        expired = self._expire()
        with self._lock:
            entries = self._idle.get(target, [])
            found = entries.pop().transport if entries else None
        for transport in expired:
            transport.close()
        if found is not None and found.is_alive():
            return found
        if found is not None:
            found.close()  # the server or the network dropped it: start over
        self.opened += 1
        return self._opener(target)

    def _give_back(self, target: SshTarget, transport: SshTransport) -> None:
        if not transport.is_alive():
            transport.close()
            return
        with self._lock:
            entries = self._idle.setdefault(target, [])
            if len(entries) < self.max_idle_per_target:
                entries.append(_Idle(transport, self._clock()))
                return
        transport.close()

    def _expire(self) -> list[SshTransport]:
        """Take out what was idle too long; the caller closes it outside the lock."""
        cutoff = self._clock() - self.idle_s
        expired: list[SshTransport] = []
        with self._lock:
            for target, entries in list(self._idle.items()):
                keep = [entry for entry in entries if entry.since >= cutoff]
                expired += [entry.transport for entry in entries if entry.since < cutoff]
                if keep:
                    self._idle[target] = keep
                else:
                    del self._idle[target]
        return expired


_POOL = ConnectionPool()
os.register_at_fork(after_in_child=_POOL.forget_after_fork)


def pooled_transport(target: SshTarget) -> AbstractContextManager[SshTransport]:
    """This process's kept connection to `target` (a context manager), for repeated short
    tasks against the same hosts: the soak collector's ticks."""
    return _POOL.lend(target)
