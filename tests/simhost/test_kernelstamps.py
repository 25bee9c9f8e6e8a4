"""Kernel receive stamps: the clock conversion on any input, and real loopback TCP sockets
whose bytes are read well after they arrived."""

from __future__ import annotations

import select
import socket
import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhost import kernelstamps
from simhost.kernelstamps import SO_TIMESTAMPNS, listen, read_stamped, receive_time

needs_stamps = pytest.mark.skipif(not kernelstamps.SUPPORTED, reason="Linux x86/ARM only")
LATE_S = 0.05  # how long the bytes wait in the socket before a test reads them
REAL_NS = 1_700_000_000 * 10**9


@pytest.fixture
def stamping_kept_on():
    """One stamping socket open for the test, as a running server or bench keeps one: with
    none, the kernel switches stamping off and the next connection's first bytes are
    sometimes unstamped (4 in 300 under load, measured)."""
    with socket.create_server(("127.0.0.1", 0)) as keeper:
        if kernelstamps.SUPPORTED:
            kernelstamps.enable(keeper)
        yield


def _stamp(real_ns: int) -> list:
    timespec = struct.pack("@ll", real_ns // 10**9, real_ns % 10**9)
    return [(socket.SOL_SOCKET, SO_TIMESTAMPNS, timespec)]


@given(st.floats(0, 100), st.floats(0, 1), st.floats(1e-6, 1))
def test_a_stamp_moves_the_time_back_by_the_age_of_the_bytes(now, age, slack):
    earliest = now - age - slack
    stamped = receive_time(_stamp(REAL_NS - round(age * 1e9)), now, earliest, REAL_NS)
    assert stamped == pytest.approx(now - age, abs=1e-6)


@given(st.floats(1e-3, 10), st.floats(0, 1))
def test_an_impossible_stamp_leaves_the_user_space_time(now, age):
    from_the_future = _stamp(REAL_NS + round(1e9 * now))
    before_the_request = _stamp(REAL_NS - round(1e9 * (age + 1)))
    assert receive_time(from_the_future, now, now - 1, REAL_NS) == now
    assert receive_time(before_the_request, now, now - age, REAL_NS) == now


def test_a_stamp_a_little_before_the_request_is_clamped_to_it():
    # TCP stamps from a cached clock: on loopback they can read a few ms before the send.
    now, earliest = 10.0, 9.5
    early = _stamp(REAL_NS - round(1e9 * (now - earliest + 0.005)))
    assert receive_time(early, now, earliest, REAL_NS) == earliest


def test_no_stamp_or_another_message_leaves_the_user_space_time():
    other = [(socket.SOL_SOCKET, SO_TIMESTAMPNS + 1, struct.pack("@ll", 0, 0))]
    assert receive_time([], 5.0, 0.0, REAL_NS) == 5.0
    assert receive_time(other, 5.0, 0.0, REAL_NS) == 5.0


def _wait_readable(sock: socket.socket) -> None:
    readable, _, _ = select.select([sock], [], [], 5)
    assert readable, "nothing arrived within 5 s"


@needs_stamps
@pytest.mark.usefixtures("stamping_kept_on")
def test_bytes_read_late_are_stamped_when_they_arrived():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        with client, peer:
            assert kernelstamps.enable(peer)
            sent = time.perf_counter()
            client.sendall(b"first token")
            _wait_readable(peer)
            time.sleep(LATE_S)  # the reader is busy: this is the delay under test
            data, stamp = read_stamped(peer, 100, sent)
            read = time.perf_counter()
    assert data == b"first token"
    # The stamp is CLOCK_REALTIME mapped onto perf_counter by two reads that are not atomic;
    # a pause between them makes it late, never early: allow 10 ms (LATE_S is 50 ms).
    assert sent <= stamp <= read - LATE_S + 0.010


@needs_stamps
@pytest.mark.usefixtures("stamping_kept_on")
def test_a_listener_remembers_when_each_connection_last_received():
    registry: dict = {}
    (listener,) = listen("127.0.0.1", 0, 8, registry)
    with listener, socket.create_connection(listener.getsockname()[:2]) as client:
        _wait_readable(listener)
        connection, _ = listener.accept()
        assert registry == {connection.fileno(): connection}
        sent = time.monotonic()
        client.sendall(b"POST / HTTP/1.1\r\n\r\n")
        _wait_readable(connection)
        time.sleep(LATE_S)  # the server's loop is busy: this is the delay under test
        assert connection.recv(100).startswith(b"POST")
        # As above: the mapped stamp may be late by a pause between two clock reads.
        assert sent <= connection.received_at <= time.monotonic() - LATE_S + 0.010
        connection.close()
    assert registry == {}


def test_listening_on_a_taken_port_is_an_os_error():
    registry: dict = {}
    (first,) = listen("127.0.0.1", 0, 8, registry)
    with first, pytest.raises(OSError):
        listen("127.0.0.1", first.getsockname()[1], 8, registry)
