"""Network faults: sshd inside a network namespace whose veth link the test cuts and restores."""

from __future__ import annotations

import time

import pytest

from runners.errors import InfrastructureError
from runners.transport import open_transport
from tests.sshd import wait_for

pytestmark = pytest.mark.slow


def test_the_namespaced_host_is_reached_over_the_veth_pair(netns_server):
    with open_transport(netns_server.target()) as transport:
        result = transport.run(["/bin/sh", "-c", 'echo "$SSH_CONNECTION"'], timeout=10)
    assert result.stdout.split()[2] == netns_server.namespace.ns_ip


def test_link_down_mid_command_is_transient_within_the_timeout_and_link_up_reconnects(
    netns_server,
):
    def cut_when_started(stream: str, line: str) -> None:
        if line == "started":
            netns_server.link_down()

    with open_transport(netns_server.target()) as transport:
        started = time.monotonic()
        with pytest.raises(InfrastructureError) as caught:
            transport.run(
                ["/bin/sh", "-c", "echo started; sleep 1; echo finished"],
                timeout=2,
                on_line=cut_when_started,
            )
        assert time.monotonic() - started < 3.5
        assert not caught.value.permanent
        assert "step run sh" in str(caught.value)
        netns_server.link_up()
        assert transport.run(["echo", "back"], timeout=10).stdout == "back\n"


def test_an_unreachable_host_fails_within_the_connect_timeout(netns_server):
    netns_server.link_down()
    target = netns_server.target(connect_timeout=1.5)
    started = time.monotonic()
    with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
        transport.run(["true"], timeout=10)
    assert time.monotonic() - started < 2.5
    assert not caught.value.permanent
    assert "step tcp connect" in str(caught.value) and "timed out" in str(caught.value)


def test_a_detached_process_survives_a_partition_and_is_found_again(netns_server, run_dirs):
    run_dir = run_dirs("partition")
    target = netns_server.target(connect_timeout=1.0, connect_attempts=1)
    with open_transport(target) as transport:
        launch = transport.launch_detached(run_dir, "tok", ["sleep", "300"], heartbeat_seconds=1)
        transport.close()  # the session that launched it is gone
        netns_server.link_down()
        with pytest.raises(InfrastructureError) as caught:
            transport.status(run_dir)
        assert not caught.value.permanent
        netns_server.link_up()
        status = wait_for(lambda: status_or_none(transport, run_dir), timeout=10)
        assert status.running and status.pid == launch.status.pid
        assert status.heartbeat_age < 3  # it kept beating while nobody watched
        assert transport.kill(run_dir).signals == ("TERM",)


def status_or_none(transport, run_dir):
    """The status, or None while the link still recovers (ARP may need a retry)."""
    try:
        return transport.status(run_dir)
    except InfrastructureError as problem:
        assert not problem.permanent
        return None
