"""A small HTTP/1.1 client on asyncio, for the bench's timed requests.

Why not aiohttp here: the bench must add little to the TTFT it measures. This client writes a
request in one call right after the start stamp, and stamps each body piece with the time the
kernel received it (plain HTTP on Linux) or, elsewhere, in data_received. Keep-alive pool,
chunked and Content-Length bodies, timeouts. Standard library and simhost.kernelstamps only;
the response parser is pure and tested on arbitrary splits.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from typing import Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from simhost import kernelstamps

BodyCallback = Callable[[bytes, float], None]


class HttpError(OSError):
    """The connection failed or the answer was not valid HTTP/1.1."""


class ResponseParser:
    """Incremental HTTP/1.1 response parser; body pieces go to `on_body` as they arrive."""

    def __init__(
        self, on_body: BodyCallback, on_status: Optional[Callable[[int], None]] = None
    ) -> None:
        self.on_body = on_body
        self.on_status = on_status
        self.status = 0
        self.headers: Dict[str, str] = {}
        self.done = False
        self.keep_alive = True
        self._buffer = b""
        self._state = "head"
        self._remaining = 0

    def feed(self, data: bytes, now: float) -> None:
        self._buffer += data
        if self._state == "size":
            self._whole_chunks(now)
        progress = True
        while progress and not self.done:
            progress = getattr(self, "_" + self._state)(now)

    def _whole_chunks(self, now: float) -> None:
        """Fast path for the streaming case: complete `size CRLF data CRLF` chunks in the buffer."""
        buffer = self._buffer
        while True:
            end = buffer.find(b"\r\n")
            if end <= 0:
                break
            try:
                size = int(buffer[:end], 16)
            except ValueError:
                break  # extensions or garbage: the general path handles and reports it
            stop = end + 2 + size
            if size == 0 or len(buffer) < stop + 2:
                break
            self.on_body(buffer[end + 2 : stop], now)
            buffer = buffer[stop + 2 :]
        self._buffer = buffer

    def _head(self, now: float) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        lines = self._buffer[:end].decode("latin-1").split("\r\n")
        self._buffer = self._buffer[end + 4 :]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise HttpError("not an HTTP/1.x status line: {!r}".format(lines[0][:80]))
        self.status = int(parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self.keep_alive = self.headers.get("connection", "").lower() != "close"
        if self.on_status is not None:
            self.on_status(self.status)
        self._choose_body()
        return True

    def _choose_body(self) -> None:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._state = "size"
        elif "content-length" in self.headers:
            self._remaining = int(self.headers["content-length"])
            self._state = "length"
            if self._remaining == 0 or self.status in (204, 304):
                self.done = True
        elif self.status in (204, 304) or 100 <= self.status < 200:
            self.done = True
        else:
            self._state = "until_close"
            self.keep_alive = False

    def _size(self, now: float) -> bool:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            return False
        size_text = self._buffer[:end].split(b";")[0].strip()
        try:
            self._remaining = int(size_text, 16)
        except ValueError:
            raise HttpError("bad chunk size {!r}".format(size_text[:20])) from None
        self._buffer = self._buffer[end + 2 :]
        self._state = "data" if self._remaining else "trailer"
        return True

    def _data(self, now: float) -> bool:
        if not self._take_body(now):
            return False
        if self._remaining == 0:
            self._state = "crlf"
        return True

    def _take_body(self, now: float) -> bool:
        """Hand up to `_remaining` buffered body bytes to on_body; False when none are here."""
        if not self._buffer:
            return False
        piece = self._buffer[: self._remaining]
        self._buffer = self._buffer[len(piece) :]
        self._remaining -= len(piece)
        self.on_body(piece, now)
        return True

    def _crlf(self, now: float) -> bool:
        if len(self._buffer) < 2:
            return False
        self._buffer = self._buffer[2:]
        self._state = "size"
        return True

    def _trailer(self, now: float) -> bool:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            return False
        self._buffer = self._buffer[end + 2 :]
        if end == 0:  # the empty line after optional trailer fields
            self.done = True
        return True

    def _length(self, now: float) -> bool:
        if not self._take_body(now):
            return False
        self.done = self._remaining == 0
        return True

    def _until_close(self, now: float) -> bool:
        if self._buffer:
            self.on_body(self._buffer, now)
            self._buffer = b""
        return False

    def connection_closed(self) -> None:
        if self._state == "until_close":
            self.done = True


_RECV_SIZE = 256 * 1024


class _Exchange:
    """The request in flight on one keep-alive connection, whatever carries its bytes."""

    def __init__(self) -> None:
        self.parser: Optional[ResponseParser] = None
        self.finished: Optional[asyncio.Future[None]] = None
        self.closed = False
        self.sent = 0.0

    def start(self, parser: ResponseParser, data: bytes) -> asyncio.Future[None]:
        """Send the request; the future is done when `parser` has the whole answer."""
        self.parser = parser
        self.finished = finished = asyncio.get_running_loop().create_future()
        self.sent = time.perf_counter()
        self.send(data)
        return finished

    def send(self, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def received(self, data: bytes, now: float) -> None:
        if self.parser is None or self.finished is None or self.finished.done():
            self.close()  # bytes nobody asked for: do not reuse this connection
            return
        try:
            self.parser.feed(data, now)
        except HttpError as error:
            self.finished.set_exception(error)
            return
        if self.parser.done:
            self.finished.set_result(None)

    def lost(self) -> None:
        self.closed = True
        if self.finished is not None and not self.finished.done():
            if self.parser is not None:
                self.parser.connection_closed()
            if self.parser is not None and self.parser.done:
                self.finished.set_result(None)
            else:
                self.finished.set_exception(HttpError("connection closed before the answer ended"))


class _ProtocolConnection(_Exchange, asyncio.Protocol):
    """Over an asyncio transport (TLS, or no kernel stamps): pieces stamped in data_received."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: Optional[asyncio.Transport] = None

    # A stream connection's transport is an asyncio.Transport (the base class says BaseTransport).
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received(data, time.perf_counter())

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.lost()

    def send(self, data: bytes) -> None:
        assert self.transport is not None  # connection_made comes first
        self.transport.write(data)

    def close(self) -> None:
        assert self.transport is not None
        self.transport.close()


class _SocketConnection(_Exchange):
    """A bare non-blocking socket read with recvmsg, so each piece carries the kernel's receive
    time: a stream's first chunk is stamped when it reached this host, not when the event loop
    got round to it (at c=64 the loop wakes once for a burst of ~60 chunks)."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.sock = sock
        self.loop = loop
        self._unsent = b""
        kernelstamps.enable(sock)
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, now = kernelstamps.read_stamped(self.sock, _RECV_SIZE, self.sent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, now = b"", 0.0
        if not data:
            self.close()
            self.lost()
            return
        self.received(data, now)

    def send(self, data: bytes) -> None:
        if not self._unsent:
            try:
                data = data[self.sock.send(data) :]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.close()
                self.lost()
                return
            if data:
                self.loop.add_writer(self.sock.fileno(), self._writable)
        self._unsent += data

    def _writable(self) -> None:
        unsent, self._unsent = self._unsent, b""
        self.loop.remove_writer(self.sock.fileno())
        self.send(unsent)

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
            self.loop.remove_writer(self.sock.fileno())
            self.sock.close()
        self.closed = True


async def _open_socket(host: str, port: int) -> _SocketConnection:
    loop = asyncio.get_running_loop()
    problem: Optional[OSError] = None
    for family, kind, proto, _, address in await loop.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as error:
            sock.close()
            problem = error
            continue
        return _SocketConnection(sock, loop)
    raise problem or HttpError("{} did not resolve".format(host))


class HttpClient:
    """Keep-alive connections to one origin, one request per connection at a time.

    Plain HTTP on Linux reads bare sockets with kernel receive stamps; TLS, other systems, or
    `kernel_stamps=False` use asyncio transports and stamp pieces in data_received."""

    def __init__(self, base_url: str, timeout: float, kernel_stamps: bool = True) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError("not an http(s) URL: {}".format(base_url))
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.timeout = timeout
        self.kernel_stamps = kernel_stamps and kernelstamps.SUPPORTED and self.ssl is None
        self._idle: List[_Exchange] = []

    async def _connection(self) -> _Exchange:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        if self.kernel_stamps:
            return await _open_socket(self.host, self.port)
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            _ProtocolConnection, self.host, self.port, ssl=self.ssl
        )
        return connection

    def _head(self, method: str, path: str, headers: Dict[str, str], length: int) -> bytes:
        lines = ["{} {}{} HTTP/1.1".format(method, self.prefix, path)]
        lines.append("Host: {}:{}".format(self.host, self.port))
        lines.append("Accept: */*")
        lines.append("Content-Length: {}".format(length))
        lines += ["{}: {}".format(k, v) for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: Optional[Dict[str, str]] = None,
        on_body: Optional[BodyCallback] = None,
        on_status: Optional[Callable[[int], None]] = None,
    ) -> Tuple[int, bytes]:
        """(status, body). With `on_body`, pieces go there as they arrive and the body is b"";
        `on_status` hears the status before the first body piece."""
        collected: List[bytes] = []
        sink = on_body or (lambda piece, now: collected.append(piece))
        connection = await self._connection()
        head = self._head(method, path, headers or {}, len(body))
        parser = ResponseParser(sink, on_status)
        finished = connection.start(parser, head + body)
        try:
            await asyncio.wait_for(asyncio.shield(finished), self.timeout)
        except BaseException:
            finished.cancel()  # nobody will read an error the close would set
            connection.close()
            raise
        status = parser.status
        if parser.keep_alive and not connection.closed:
            connection.parser = None
            self._idle.append(connection)
        else:
            connection.close()
        return status, b"".join(collected)

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle = []
