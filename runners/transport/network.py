"""TCP connections for the SSH transport, the retry schedule of a connection, and plain-words
descriptions of network failures. Sockets only: imports no paramiko and no Django.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

from runners.errors import InfrastructureError

STEP_TCP = "tcp connect"
FIRST_RETRY_S = 0.5
MAX_RETRY_S = 4.0

T = TypeVar("T")


def with_backoff(
    attempt_once: Callable[[], T],
    *,
    attempts: int,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `attempt_once` until it returns, retrying a transient InfrastructureError after
    0.5, 1, 2, 4, 4... s; a new attempt starts only within `budget_s` of the first."""
    first = clock()
    for attempt in range(1, attempts + 1):
        try:
            return attempt_once()
        except InfrastructureError as problem:
            delay = min(FIRST_RETRY_S * 2 ** (attempt - 1), MAX_RETRY_S)
            late = clock() - first + delay > budget_s
            if problem.permanent or attempt == attempts or late:
                raise
            sleep(delay)  # backoff between attempts, not waiting for an event
    raise AssertionError("unreachable")


def tcp_connect(
    address: str, port: int, timeout: float, *, keepalive: float, host: str
) -> socket.socket:
    """A TCP connection with kernel keepalive (paramiko's own never notices a dead peer)."""
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as problem:
        reason = f"cannot connect to {address}:{port}: {describe(problem)}"
        raise InfrastructureError(reason, host=host, step=STEP_TCP) from None
    idle = max(1, int(keepalive))
    # Without TCP_NODELAY each small request waits out the peer's delayed ACK (~40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, idle // 3))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    return sock


def describe(problem: BaseException) -> str:
    if isinstance(problem, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(problem, EOFError):
        return "the server closed the connection"
    if isinstance(problem, OSError) and problem.strerror:
        return problem.strerror
    return str(problem) or type(problem).__name__
