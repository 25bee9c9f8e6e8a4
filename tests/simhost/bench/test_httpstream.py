"""The bench's HTTP/1.1 client: its parser on arbitrary splits, and a stdlib server it did not
write (http.server) for keep-alive, close, timeout and receive-stamp behaviour, over both of its
connection kinds (bare sockets with kernel stamps, asyncio transports)."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost import kernelstamps
from simhost.bench.http import HttpClient, HttpError, ResponseParser

LATE_S = 0.05  # how long a busy client loop leaves the first chunk unread


def _chunked(pieces) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n" + body + b"0\r\n\r\n"


def _feed(raw: bytes, cuts) -> tuple:
    received = []
    parser = ResponseParser(lambda piece, now: received.append(piece))
    points = sorted({c % (len(raw) + 1) for c in cuts})
    start = 0
    for point in [*points, len(raw)]:
        parser.feed(raw[start:point], 0.0)
        start = point
    return parser, b"".join(received)


@given(
    st.lists(st.binary(min_size=1, max_size=40), max_size=8),
    st.lists(st.integers(0, 10**6), max_size=12),
)
def test_a_chunked_body_survives_any_split_of_the_bytes(pieces, cuts):
    parser, body = _feed(_chunked(pieces), cuts)
    assert parser.done and parser.status == 200
    assert parser.headers["x-a"] == "b"
    assert body == b"".join(pieces)


@given(st.binary(max_size=200), st.lists(st.integers(0, 10**6), max_size=12))
def test_a_content_length_body_survives_any_split_of_the_bytes(payload, cuts):
    raw = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload
    parser, body = _feed(raw, cuts)
    assert parser.done and parser.status == 404 and body == payload


def test_a_body_without_length_ends_with_the_connection():
    received = []
    parser = ResponseParser(lambda piece, now: received.append(piece))
    parser.feed(b"HTTP/1.1 200 OK\r\n\r\nabc", 0.0)
    assert not parser.done and not parser.keep_alive
    parser.connection_closed()
    assert parser.done and received == [b"abc"]


@pytest.mark.parametrize(
    "raw",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        _chunked([]).replace(b"0\r\n", b"zz\r\n"),
    ],
)
def test_garbage_is_an_http_error(raw):
    with pytest.raises(HttpError):
        ResponseParser(lambda piece, now: None).feed(raw, 0.0)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP stamps a read with its newest segment; Nagle would hold the chunks after the first
    # one until the busy client's delayed ACK, and the first chunk's read would carry their time
    disable_nagle_algorithm = True
    connections: set = set()
    first_sent = threading.Event()
    first_sent_at = 0.0

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        _Handler.connections.add(self.client_address)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/size":
            answer = b"%d" % len(body)
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer)
            )
            return
        if self.path == "/hang":
            threading.Event().wait(5)
            return
        if self.path == "/cut":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for event in (b"data: " + body + b"\n\n", b"data: [DONE]\n\n"):
            _Handler.first_sent_at = _Handler.first_sent_at or time.perf_counter()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            _Handler.first_sent.set()
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def stdlib_server():
    _Handler.connections = set()
    _Handler.first_sent = threading.Event()
    _Handler.first_sent_at = 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _collector(pieces: list):
    return lambda piece, now: pieces.append(piece)


@pytest.fixture(params=[True, False], ids=["kernel-stamps", "transport"])
def stamps(request) -> bool:
    return request.param


def test_it_streams_from_a_server_it_did_not_write_and_reuses_the_connection(stdlib_server, stamps):
    async def scenario():
        client = HttpClient(stdlib_server, timeout=5, kernel_stamps=stamps)
        bodies = []
        for word in (b"one", b"two", b"three"):
            pieces: list = []
            status, _ = await client.request("POST", "/x", word, on_body=_collector(pieces))
            bodies.append((status, b"".join(pieces)))
        client.close()
        return bodies

    bodies = asyncio.run(scenario())
    assert [b for _, b in bodies] == [
        b"data: %s\n\ndata: [DONE]\n\n" % w for w in (b"one", b"two", b"three")
    ]
    assert {s for s, _ in bodies} == {200}
    assert len(_Handler.connections) == 1  # keep-alive


def test_a_connection_cut_mid_answer_is_an_error(stdlib_server, stamps):
    async def scenario():
        client = HttpClient(stdlib_server, timeout=5, kernel_stamps=stamps)
        try:
            await client.request("POST", "/cut", b"x")
        finally:
            client.close()

    with pytest.raises(HttpError, match="closed before the answer ended"):
        asyncio.run(scenario())


def test_a_silent_server_times_out(stdlib_server, stamps):
    async def scenario():
        client = HttpClient(stdlib_server, timeout=0.3, kernel_stamps=stamps)
        try:
            await client.request("POST", "/hang", b"x")
        finally:
            client.close()

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(scenario())


def test_a_refused_connection_is_an_os_error(stamps):
    async def scenario():
        client = HttpClient("http://127.0.0.1:9", timeout=1, kernel_stamps=stamps)
        await client.request("GET", "/health")

    with pytest.raises(OSError):
        asyncio.run(scenario())


def test_a_body_larger_than_the_socket_buffers_is_sent_whole(stdlib_server, stamps):
    body = bytes(range(256)) * 32 * 1024  # 8 MiB: the first send cannot take it all

    async def scenario():
        client = HttpClient(stdlib_server, timeout=30, kernel_stamps=stamps)
        try:
            return await client.request("POST", "/size", body)
        finally:
            client.close()

    assert asyncio.run(scenario()) == (200, b"%d" % len(body))


def _busy_until_the_first_chunk_was_sent() -> None:
    """Stands for an event loop busy with other streams when a first chunk arrives."""
    assert _Handler.first_sent.wait(5)
    time.sleep(LATE_S)


def _stamps_of_a_late_read(url: str, kernel_stamps: bool) -> tuple:
    async def scenario():
        client = HttpClient(url, timeout=5, kernel_stamps=kernel_stamps)
        await client.request("POST", "/x", b"warm")  # connected: the next request sends at once
        _Handler.first_sent.clear()
        _Handler.first_sent_at = 0.0
        stamps: list = []
        asyncio.get_running_loop().call_soon(_busy_until_the_first_chunk_was_sent)
        await client.request("POST", "/x", b"hi", on_body=lambda piece, now: stamps.append(now))
        client.close()
        return stamps[0], _Handler.first_sent_at

    return asyncio.run(scenario())


@pytest.mark.skipif(not kernelstamps.SUPPORTED, reason="kernel stamps are Linux x86/ARM only")
def test_a_first_chunk_read_late_is_stamped_when_it_reached_the_host(stdlib_server):
    stamp, sent = _stamps_of_a_late_read(stdlib_server, kernel_stamps=True)
    assert sent <= stamp < sent + LATE_S / 2


def test_without_kernel_stamps_a_late_read_is_stamped_late(stdlib_server):
    stamp, sent = _stamps_of_a_late_read(stdlib_server, kernel_stamps=False)
    assert stamp >= sent + LATE_S
