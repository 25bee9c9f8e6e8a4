"""Fixtures for the transport tests: real sshd servers (tests/sshd.py) and run directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runners.transport import LocalTransport, Transport, open_transport
from tests.sshd import NamespacedServer, SshServer, loopback_sshd, netns_available, netns_sshd


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One sshd on loopback shared by a test module: tests must not stop it or change keys."""
    with loopback_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshServer]:
    """An sshd of this test alone, free to restart or re-key."""
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with loopback_sshd(workdir) as server:
        yield server


@pytest.fixture
def netns_server(tmp_path: Path) -> Iterator[NamespacedServer]:
    """sshd in its own network namespace, so the test can cut the link."""
    if not netns_available():
        pytest.skip("network namespaces need root and iproute2")
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with netns_sshd(workdir) as server:
        yield server


@pytest.fixture
def ssh_transport(sshd: SshServer) -> Iterator[Transport]:
    with open_transport(sshd.target()) as transport:
        yield transport


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.slow)])
def any_transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    """Each behaviour test runs on both transports: they must not differ."""
    if request.param == "local":
        yield LocalTransport()
        return
    server: SshServer = request.getfixturevalue("sshd")
    with open_transport(server.target()) as connected:
        yield connected


@pytest.fixture
def run_dirs(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Makes run directory paths under tmp_path and kills whatever they still hold at the end."""
    made: list[str] = []

    def make(name: str) -> str:
        path = str(tmp_path / "runs" / name)
        made.append(path)
        return path

    yield make
    local = LocalTransport()
    for path in made:
        local.kill(path, grace=1)
