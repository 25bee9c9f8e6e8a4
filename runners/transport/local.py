"""The local transport: the Transport interface on this machine with subprocess, never a shell.

For the GPU box the service itself runs on, and for the demo. Imports no paramiko.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import IO

from runners.commands import checked_argv
from runners.errors import InfrastructureError
from runners.transport.capture import DEFAULT_CAPTURE_BYTES, LineCallback, StreamCapture
from runners.transport.detached import DetachedProcesses
from runners.transport.files import (
    CHUNK_BYTES,
    COPIED,
    check_digest,
    cut_to_whole_lines,
    partial_file,
    sha256_of_file,
)
from runners.transport.types import CommandResult

READ_BYTES = 1 << 20


class LocalTransport(DetachedProcesses):
    """Runs argv directly with subprocess; files are copied, verified and renamed into place."""

    def __init__(self, name: str = "local") -> None:
        self.host = name

    def close(self) -> None:
        """Nothing to close: kept so both transports are used the same way."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        on_line: LineCallback | None = None,
        max_bytes: int = DEFAULT_CAPTURE_BYTES,
    ) -> CommandResult:
        """Run argv; on timeout its whole process group is killed and a transient error raised."""
        args = checked_argv(argv)
        step = f"run {os.path.basename(args[0])}"
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own group, so a timeout can kill its children too
            )
        except OSError as problem:
            # What a shell would answer for a missing or non-executable program.
            message = f"{args[0]}: {problem.strerror}\n"
            return CommandResult(127, "", message, time.monotonic() - started)
        out = StreamCapture("stdout", max_bytes=max_bytes, on_line=on_line)
        err = StreamCapture("stderr", max_bytes=max_bytes, on_line=on_line)
        try:
            self._drain(process, out, err, deadline=started + timeout)
            code = process.wait(timeout=max(0.0, started + timeout - time.monotonic()))
        except (TimeoutError, subprocess.TimeoutExpired):
            _kill_group(process)
            raise InfrastructureError(
                f"the command did not finish within {timeout:g} s and was killed",
                host=self.host,
                step=step,
            ) from None
        except BaseException:
            _kill_group(process)  # e.g. on_line raised: leave nothing running behind
            raise
        out.finish()
        err.finish()
        truncated = out.truncated or err.truncated
        return CommandResult(code, out.text, err.text, time.monotonic() - started, truncated)

    def _drain(
        self,
        process: subprocess.Popen[bytes],
        out: StreamCapture,
        err: StreamCapture,
        *,
        deadline: float,
    ) -> None:
        """Read stdout and stderr together until both close, so neither pipe can fill up."""
        assert process.stdout is not None and process.stderr is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, out)
            selector.register(process.stderr, selectors.EVENT_READ, err)
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                for key, _ in selector.select(timeout=remaining):
                    pipe: IO[bytes] = key.fileobj  # type: ignore[assignment]
                    data = os.read(pipe.fileno(), READ_BYTES)
                    if data:
                        key.data.feed(data)
                    else:
                        selector.unregister(pipe)
                        pipe.close()

    def put(self, local_path: str, remote_path: str) -> str:
        return self._copy(local_path, remote_path, step=f"put {remote_path}")

    def get(self, remote_path: str, local_path: str) -> str:
        return self._copy(remote_path, local_path, step=f"get {remote_path}")

    def _copy(self, source: str, destination: str, *, step: str) -> str:
        """Copy to a partial sibling, check both digests match, then rename into place."""
        try:
            expected = sha256_of_file(source)
            os.makedirs(os.path.dirname(os.path.abspath(destination)), exist_ok=True)
            with partial_file(destination) as partial:
                shutil.copyfile(source, partial)
                copied = sha256_of_file(partial)
                check_digest(copied, expected, sides=COPIED, host=self.host, step=step)
                os.replace(partial, destination)
        except OSError as problem:
            raise InfrastructureError(
                f"{problem.strerror}: {problem.filename}", permanent=True, host=self.host, step=step
            ) from None
        return expected

    def read_from(
        self, path: str, offset: int, *, max_bytes: int = CHUNK_BYTES, whole_lines: bool = False
    ) -> tuple[bytes, int]:
        """Bytes of `path` from `offset` (at most max_bytes); a missing file reads as empty."""
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(max_bytes)
        except FileNotFoundError:
            return b"", offset
        except OSError as problem:
            raise InfrastructureError(
                f"{problem.strerror}: {path}", permanent=True, host=self.host, step=f"read {path}"
            ) from None
        if whole_lines:
            data = cut_to_whole_lines(data, max_bytes)
        return data, offset + len(data)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
