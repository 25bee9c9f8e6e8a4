"""TCP connections for the SSH transport, and plain-words descriptions of network failures.

Sockets only: imports no paramiko and no Django.
"""

from __future__ import annotations

import socket

from runners.errors import InfrastructureError

STEP_TCP = "tcp connect"


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
