"""Connections kept across tasks (runners/transport/pool.py) against a real sshd on loopback:
reused while alive, rebuilt when the server dropped them, never reused past a re-pinned host
key, closed when idle too long or when the task using one failed, and not shared over a fork.
"""

from __future__ import annotations

import os

import pytest

from runners.errors import HOST_KEY_CHANGED, InfrastructureError
from runners.transport.pool import ConnectionPool

pytestmark = pytest.mark.slow


def client_port(transport) -> str:
    """The client side's TCP port as sshd sees it: the same port means the same connection."""
    result = transport.run(["/bin/sh", "-c", 'echo "$SSH_CONNECTION"'], timeout=15)
    return result.stdout.split()[1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_connection_serves_many_tasks_and_a_dropped_one_is_rebuilt(own_sshd):
    pool, target = ConnectionPool(), own_sshd.target()
    ports = []
    for _ in range(5):
        with pool.lend(target) as transport:
            ports.append(client_port(transport))
    assert len(set(ports)) == 1 and pool.opened == 1
    own_sshd.restart()  # every connection it served is reset
    with pool.lend(target) as transport:
        assert client_port(transport) != ports[0]
    pool.close_all()


def test_a_re_pinned_host_key_is_another_target_and_the_old_pin_is_refused(own_sshd):
    pool, old = ConnectionPool(), own_sshd.target()
    with pool.lend(old) as transport:
        client_port(transport)
    own_sshd.regenerate_host_key()
    with pytest.raises(InfrastructureError) as refused, pool.lend(old) as transport:
        transport.run(["true"], timeout=15)
    assert HOST_KEY_CHANGED in str(refused.value)
    assert pool.idle_count() == 0  # the failed one was closed, not kept
    with pool.lend(own_sshd.target()) as transport:
        assert transport.run(["true"], timeout=15).ok
    pool.close_all()


def test_an_idle_connection_expires_and_a_failed_task_does_not_return_its_own(own_sshd):
    clock = Clock()
    pool, target = ConnectionPool(idle_s=60, clock=clock), own_sshd.target()
    with pool.lend(target) as transport:
        first = transport
        client_port(transport)
    clock.now += 61
    with pool.lend(target) as transport:
        assert transport is not first and not first.is_alive()
        client_port(transport)
    with pytest.raises(RuntimeError), pool.lend(target) as transport:
        client_port(transport)
        raise RuntimeError("the task failed halfway")
    assert pool.idle_count() == 0 and not transport.is_alive()
    pool.close_all()


def test_a_forked_child_opens_its_own_and_leaves_the_parents_working(own_sshd):
    pool, target = ConnectionPool(), own_sshd.target()
    with pool.lend(target) as transport:
        parent_port = client_port(transport)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status only
        code = 1
        try:
            with pool.lend(target) as transport:
                code = 0 if client_port(transport) != parent_port and pool.opened == 2 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with pool.lend(target) as transport:
        assert client_port(transport) == parent_port  # the child never closed it
    pool.close_all()
