"""TCP connections for the SSH transport, the one retry rule for transport errors (inside a
connection attempt and across a run's outage window), and plain-words descriptions of network
failures. Sockets only: imports no paramiko and no Django.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

from runners.errors import InfrastructureError

STEP_TCP = "tcp connect"
STEP_AUTH = "authentication"
FIRST_RETRY_S = 0.5
MAX_RETRY_S = 4.0
# Between the tasks that ride out an outage: long enough not to hammer a host that is down,
# short enough that a run resumes within seconds of the host coming back.
OUTAGE_FIRST_RETRY_S = 1.0
OUTAGE_MAX_RETRY_S = 15.0

T = TypeVar("T")


def backoff_delay(
    retry: int, *, first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S
) -> float:
    """Seconds to wait before retry number `retry` (1, 2, ...): doubling from first_s, capped."""
    growth: int = 2 ** (max(retry, 1) - 1)  # int ** int is Any to mypy (a negative power)
    return min(first_s * growth, max_s)


def is_transient(error: BaseException) -> bool:
    """Whether retrying may heal `error`: a connection refused, reset or timed out, a lost link,
    a command timeout; and an authentication refusal, since the key was accepted when the host
    was onboarded, so a refusal later is most often the host's account backend (PAM, LDAP)
    failing for a while: the window bounds what a revoked key costs. A host-key change, an
    unpinned key, no common algorithms, a spec error or a bug never are."""
    if not isinstance(error, InfrastructureError):
        return False
    return not error.permanent or error.step == STEP_AUTH


def outage_retry_after(
    error: BaseException, *, outage_s: float, retries: int, window_s: float
) -> float | None:
    """The outage rule every long-lived caller shares (a run's driver, the soak collector):
    seconds to wait before the next try, or None to give up now.

    `outage_s`: how long the host has been unreachable (since the first failure of this
    outage); `retries`: how many tries failed in it so far (1 after the first failure);
    `window_s`: how long to keep trying. A try is scheduled only if it starts inside the window.
    """
    if not is_transient(error):
        return None
    delay = backoff_delay(retries, first_s=OUTAGE_FIRST_RETRY_S, max_s=OUTAGE_MAX_RETRY_S)
    if outage_s >= window_s:
        return None
    return min(delay, max(window_s - outage_s, 0.0))


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
            delay = backoff_delay(attempt)
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
