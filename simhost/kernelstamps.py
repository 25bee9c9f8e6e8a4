"""Kernel receive timestamps (SO_TIMESTAMPNS) for both HTTP ends of simhost: when the bytes a
read returns reached this host, however late the event loop got round to reading them.

Standard library only; imports no other simhost module, no asyncio, no aiohttp.
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

# SO_TIMESTAMPNS has no name in Python's socket module; 35 is its value on Linux for x86 and
# ARM (asm-generic). Other architectures number it differently, so they go without.
SO_TIMESTAMPNS = 35
SUPPORTED = sys.platform.startswith("linux") and platform.machine() in (
    "x86_64",
    "i686",
    "aarch64",
    "armv7l",
)
_TIMESPEC = struct.Struct("@ll")  # struct timespec {time_t tv_sec; long tv_nsec}
# How far before `earliest` a stamp may read and still count (see receive_time).
CACHED_CLOCK_SLACK_S = 0.010
ANCILLARY_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if SUPPORTED else 0

Ancillary = List[Tuple[int, int, bytes]]


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what this socket receives; False where it cannot."""
    if not SUPPORTED:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def receive_time(ancillary: Ancillary, now: float, earliest: float, real_ns: int) -> float:
    """When the kernel received the bytes just read, on the clock `now` was read from
    (CLOCK_MONOTONIC: time.monotonic or time.perf_counter on Linux); `now` itself when there is
    no stamp or an impossible one. The stamp is CLOCK_REALTIME, and `real_ns` is that clock read
    just before `now`. TCP gives the newest stamp of the segments read, so the result is never
    earlier than the first byte's arrival (reads that lag a whole stream step run late)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            age: float = (real_ns - seconds * 1_000_000_000 - nanoseconds) / 1e9
            # TCP's stamps come from a clock it caches, so on loopback a stamp may read a little
            # before `earliest` (the request was sent, the connection accepted): clamp those.
            # Anything further off means the wall clock stepped: keep the user-space stamp.
            if 0.0 <= age <= now - earliest + CACHED_CLOCK_SLACK_S:
                return max(now - age, earliest)
    return now


def read_stamped(sock: socket.socket, size: int, earliest: float) -> Tuple[bytes, float]:
    """One recvmsg: the bytes and their kernel receive time on time.perf_counter's clock."""
    data, ancillary, _, _ = sock.recvmsg(size, ANCILLARY_SPACE)
    # The wall clock first: a pause between the two reads then makes the result late (a
    # slightly longer TTFT), never early, and never out of range.
    real_ns = time.time_ns()
    return data, receive_time(ancillary, time.perf_counter(), earliest, real_ns)


class StampedConnection(socket.socket):
    """An accepted TCP connection whose recv() remembers when the kernel received the bytes it
    returned last (`received_at`, time.monotonic's clock), for the server's TTFT start."""

    def setup(self, registry: Dict[int, "StampedConnection"]) -> None:
        self.registry = registry
        self.accepted_at = time.monotonic()
        self.received_at: Optional[float] = None
        self.stamped = enable(self)
        registry[self.fileno()] = self

    def recv(self, size: int, flags: int = 0) -> bytes:
        if not self.stamped:
            return super().recv(size, flags)
        data, ancillary, _, _ = self.recvmsg(size, ANCILLARY_SPACE, flags)
        if data:
            real_ns = time.time_ns()  # first, as in read_stamped
            self.received_at = receive_time(ancillary, time.monotonic(), self.accepted_at, real_ns)
        return data

    def close(self) -> None:
        registry = getattr(self, "registry", {})
        if registry.get(self.fileno()) is self:
            del registry[self.fileno()]
        super().close()


Registry = Dict[int, StampedConnection]


class StampingListener(socket.socket):
    """A listening socket whose accepted connections are StampedConnections, found again by
    file descriptor (an asyncio transport hides the socket object behind a wrapper)."""

    connections: Dict[int, StampedConnection]

    def accept(self) -> Tuple[StampedConnection, object]:
        plain, address = super().accept()
        connection = StampedConnection(plain.family, plain.type, plain.proto, plain.detach())
        connection.setup(self.connections)
        return connection, address


def listen(host: str, port: int, backlog: int, registry: Registry) -> List[StampingListener]:
    """Bind and listen on every address `host` resolves to, as aiohttp's TCPSite does
    (SO_REUSEADDR on, IPv6 sockets IPv6-only so both families can share the port); accepted
    connections are entered in `registry` by file descriptor while they are open."""
    listeners: List[StampingListener] = []
    seen = set()
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            if (family, address) in seen:
                continue
            seen.add((family, address))
            listeners.append(_listener(family, kind, proto, address, backlog, registry))
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def _listener(
    family: int, kind: int, proto: int, address: Tuple[Any, ...], backlog: int, registry: Registry
) -> StampingListener:
    listener = StampingListener(family, kind, proto)
    listener.connections = registry
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listener.bind(address)
        listener.listen(backlog)
    except OSError:
        listener.close()
        raise
    # A stamping socket that lives as long as the server keeps the kernel's stamping switched
    # on; when the last one closes it goes off, and the next connection's first bytes may
    # arrive unstamped (4 in 300 under load, measured).
    enable(listener)
    listener.setblocking(False)
    return listener
