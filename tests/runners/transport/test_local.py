"""The local transport (runners/transport/local.py), and `run`/file behaviour both must share."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from runners.errors import InfrastructureError, SpecError
from runners.transport import LocalTransport


def gone(pid: int) -> bool:
    """The process has exited: no /proc entry, or only a zombie waiting for its reaper."""
    try:
        return " Z " in Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True


def assert_gone_soon(pid: int, deadline_s: float = 5.0) -> None:
    # SIGKILL is delivered at once but takes effect when the process is next scheduled: an
    # orphan of the killed group may still show as running for a moment on a loaded machine.
    end = time.monotonic() + deadline_s
    while not gone(pid):
        assert time.monotonic() < end, f"process {pid} still runs {deadline_s} s after the kill"
        time.sleep(0.01)  # the polling interval


def test_argv_is_never_given_to_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    result = LocalTransport().run(["printf", "%s", f"$(touch {marker}); `id`"], timeout=5)
    assert result.stdout == f"$(touch {marker}); `id`"
    assert not marker.exists()


def test_a_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "child"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    started = time.monotonic()
    with pytest.raises(InfrastructureError) as caught:
        LocalTransport().run(["/bin/sh", "-c", script], timeout=0.5)
    assert time.monotonic() - started < 3
    assert not caught.value.permanent and "killed" in str(caught.value)
    child = int(pid_file.read_text())
    assert_gone_soon(child)


def test_a_failing_callback_leaves_nothing_running(tmp_path):
    pid_file = tmp_path / "pid"

    def explode(stream: str, line: str) -> None:
        raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError):
        LocalTransport().run(
            ["/bin/sh", "-c", f"echo $$ > {pid_file}; echo go; sleep 60"],
            timeout=10,
            on_line=explode,
        )
    pid = int(pid_file.read_text())
    assert_gone_soon(pid)


def test_a_missing_program_answers_127_like_a_shell():
    result = LocalTransport().run(["/no/such/program"], timeout=5)
    assert result.exit_code == 127 and "No such file" in result.stderr


def test_a_signal_death_is_a_negative_exit_code():
    assert LocalTransport().run(["/bin/sh", "-c", "kill -9 $$"], timeout=5).exit_code == -9


def test_bad_argv_is_a_spec_error():
    with pytest.raises(SpecError):
        LocalTransport().run("ls -l", timeout=5)  # type: ignore[arg-type]


def test_big_output_on_both_streams_completes_on_either_transport(any_transport):
    script = "head -c 8388608 /dev/zero & head -c 8388608 /dev/zero >&2; wait; echo END"
    result = any_transport.run(["/bin/sh", "-c", script], timeout=60, max_bytes=1024)
    assert result.ok and result.truncated
    assert result.stdout.endswith("END\n") and len(result.stdout) == 1024


def test_both_transports_stream_the_same_lines(any_transport):
    lines: list[tuple[str, str]] = []
    any_transport.run(
        ["/bin/sh", "-c", "printf 'a\\nb'; printf 'c\\r\\n' >&2"],
        timeout=10,
        on_line=lambda stream, line: lines.append((stream, line)),
    )
    assert sorted(lines) == [("stderr", "c"), ("stdout", "a"), ("stdout", "b")]


def test_put_and_get_return_the_sha256_and_leave_no_partial_files(any_transport, tmp_path):
    payload = os.urandom(100_000)
    source = tmp_path / "src.bin"
    source.write_bytes(payload)
    target = tmp_path / "out" / "dst.bin"
    assert any_transport.put(str(source), str(target)) == hashlib.sha256(payload).hexdigest()
    fetched = tmp_path / "fetched.bin"
    assert any_transport.get(str(target), str(fetched)) == hashlib.sha256(payload).hexdigest()
    assert fetched.read_bytes() == payload
    assert [path.name for path in target.parent.iterdir()] == ["dst.bin"]


def test_get_of_a_missing_file_is_permanent_on_either_transport(any_transport, tmp_path):
    with pytest.raises(InfrastructureError) as caught:
        any_transport.get(str(tmp_path / "nope"), str(tmp_path / "here"))
    assert caught.value.permanent
    assert not (tmp_path / "here").exists()
