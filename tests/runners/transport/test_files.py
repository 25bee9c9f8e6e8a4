"""Copy verification shared by the transports, on a fake command runner."""

from __future__ import annotations

import pytest

from runners.errors import InfrastructureError, SpecError
from runners.transport.files import (
    COPIED,
    RECEIVED,
    SENT,
    check_digest,
    file_problem,
    make_remote_parent,
    remote_sha256,
)
from runners.transport.types import CommandResult


def runner(exit_code: int, stdout: str = "", stderr: str = ""):
    calls = []

    def run(argv, *, timeout):
        calls.append(list(argv))
        return CommandResult(exit_code, stdout, stderr, 0.01)

    return run, calls


def test_the_host_hashes_the_file_itself():
    run, calls = runner(0, stdout="ab" * 32 + "\n")
    assert remote_sha256(run, "/r/x.json", host="h", step="get") == "ab" * 32
    assert calls[0][:2] == ["python3", "-c"] and calls[0][-1] == "/r/x.json"


def test_a_file_the_host_cannot_hash_is_a_permanent_error_naming_its_last_line():
    run, _ = runner(1, stderr="Traceback\nFileNotFoundError: /r/x.json\n")
    with pytest.raises(InfrastructureError) as error:
        remote_sha256(run, "/r/x.json", host="h", step="get")
    assert error.value.reason == "cannot hash /r/x.json: FileNotFoundError: /r/x.json"
    assert error.value.permanent and error.value.step == "get"


def test_a_parent_that_cannot_be_made_is_a_permanent_error():
    run, calls = runner(1, stderr="mkdir: Permission denied\n")
    with pytest.raises(InfrastructureError, match="cannot create /r: mkdir") as e:
        make_remote_parent(run, "/r/x.json", host="h", step="put")
    assert e.value.permanent and calls == [["mkdir", "-p", "/r"]]


@pytest.mark.parametrize(
    "sides, message",
    [
        (RECEIVED, "SHA-256 mismatch: b received, a on the host"),
        (SENT, "b on the host, a sent"),
        (COPIED, "b after copy, a at the source"),
    ],
)
def test_a_copy_with_another_digest_is_refused_saying_which_side_is_which(sides, message):
    check_digest("a", "a", sides=sides, host="h", step="s")
    with pytest.raises(InfrastructureError, match=message) as error:
        check_digest("b", "a", sides=sides, host="h", step="s")
    assert not error.value.permanent


def test_file_problems_are_classed_and_network_ones_left_to_the_transport():
    missing = file_problem(FileNotFoundError("no such file"), host="h", step="s")
    assert isinstance(missing, InfrastructureError) and missing.permanent
    spec = SpecError("bad path")
    assert file_problem(spec, host="h", step="s") is spec
    assert file_problem(ConnectionResetError("reset"), host="h", step="s") is None
