"""The fault suite's fixtures: an sshd of each test's own (the emulated hosts' link)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd import SshServer, loopback_sshd


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshServer]:
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with loopback_sshd(workdir) as server:
        yield server
