"""The SSH transport (paramiko), and the unauthenticated host-key scan used at onboarding.

The only module in the project that imports paramiko. Imports no Django.
"""

from __future__ import annotations

import io
import os
import posixpath
import select
import time
from collections.abc import Sequence
from contextlib import suppress

import paramiko

from runners.commands import checked_argv, to_shell
from runners.errors import HOST_KEY_CHANGED, InfrastructureError, SpecError
from runners.transport.capture import DEFAULT_CAPTURE_BYTES, LineCallback, StreamCapture
from runners.transport.detached import DetachedProcesses
from runners.transport.files import (
    CHUNK_BYTES,
    FILE_TIMEOUT,
    RECEIVED,
    SENT,
    check_digest,
    cut_to_whole_lines,
    file_problem,
    local_sha256,
    make_remote_parent,
    partial_file,
    remote_sha256,
    sha256_of_file,
    temporary_name,
)
from runners.transport.hostkeys import fingerprint_of_blob, known_hosts_name, parse_host_key
from runners.transport.network import STEP_AUTH, describe, tcp_connect, with_backoff
from runners.transport.types import CommandResult, SshTarget

STEP_HANDSHAKE = "ssh handshake"
STEP_HOST_KEY = "host key check"
READ_BYTES = 1 << 16
_TRANSIENT = (OSError, EOFError, paramiko.SSHException)


class _NotPinnedError(paramiko.SSHException):  # type: ignore[misc]  # paramiko is untyped
    def __init__(self, key: paramiko.PKey) -> None:
        super().__init__("host key not pinned")
        self.key = key


class _PinnedKeyPolicy(paramiko.RejectPolicy):  # type: ignore[misc]  # paramiko is untyped
    """RejectPolicy that keeps the offered key, so the refusal can show its fingerprint."""

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        raise _NotPinnedError(key)


def open_transport(target: SshTarget) -> SshTransport:
    """An SSH transport for `target`; it connects on first use and reconnects when needed."""
    return SshTransport(target)


def scan_host_key(address: str, port: int = 22, timeout: float = 10.0) -> tuple[str, str]:
    """(public key line, SHA256 fingerprint) the server presents. No authentication happens
    and nothing is pinned: a person confirms the fingerprint, then the key line is stored."""
    where = {"host": f"{address}:{port}"}
    sock = tcp_connect(address, port, timeout, keepalive=timeout, host=where["host"])
    session = paramiko.Transport(sock)
    try:
        session.banner_timeout = timeout
        session.start_client(timeout=timeout)
        key = session.get_remote_server_key()
    except _TRANSIENT as problem:
        raise _classified(problem, step=STEP_HANDSHAKE, **where) from None
    finally:
        session.close()
    return f"{key.get_name()} {key.get_base64()}", fingerprint_of_blob(key.asbytes())


class SshTransport(DetachedProcesses):
    """One paramiko connection to one target, reused across calls. Not thread-safe."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.host = target.name
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._pkey: paramiko.PKey | None = None

    def close(self) -> None:
        client, self._client, self._sftp = self._client, None, None
        if client is not None:
            client.close()

    def is_alive(self) -> bool:
        """Up as far as this side knows (a silently dropped peer fails the next channel open)."""
        session = self._client.get_transport() if self._client else None
        return session is not None and session.is_active()

    def connect(self) -> None:
        """Connect now (commands connect on demand); retries transient failures with backoff."""
        self._connected()

    # -- commands --------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        on_line: LineCallback | None = None,
        max_bytes: int = DEFAULT_CAPTURE_BYTES,
    ) -> CommandResult:
        """Run argv (each element one shell word) and read stdout and stderr together.

        A timeout leaves the remote command running (SSH cannot signal it): kill it through a
        detached run directory if that matters. The connection is dropped and rebuilt next call.
        """
        command = to_shell(argv)
        step = f"run {posixpath.basename(checked_argv(argv)[0])}"
        started = time.monotonic()
        channel = self._open_channel(step)
        out = StreamCapture("stdout", max_bytes=max_bytes, on_line=on_line)
        err = StreamCapture("stderr", max_bytes=max_bytes, on_line=on_line)
        try:
            channel.exec_command(command)
            code = self._collect(channel, out, err, timeout=timeout, started=started, step=step)
        except _TRANSIENT as problem:
            self.close()
            raise _classified(problem, step=step, host=self.host) from None
        finally:
            channel.close()
        out.finish()
        err.finish()
        truncated = out.truncated or err.truncated
        return CommandResult(code, out.text, err.text, time.monotonic() - started, truncated)

    def _open_channel(self, step: str) -> paramiko.Channel:
        # Nothing has been sent yet, so one retry on a fresh connection is always safe.
        for attempt in (1, 2):
            session = self._connected().get_transport()
            try:
                assert session is not None
                return session.open_session(timeout=self.target.channel_timeout)
            except _TRANSIENT as problem:
                self.close()
                if attempt == 2:
                    raise _classified(problem, step=step, host=self.host) from None
        raise AssertionError("unreachable")

    def _collect(
        self,
        channel: paramiko.Channel,
        out: StreamCapture,
        err: StreamCapture,
        *,
        timeout: float,
        started: float,
        step: str,
    ) -> int:
        """Drain both streams until EOF and exit status; never wait on one stream alone."""
        deadline = started + timeout
        while not _drained(channel):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise InfrastructureError(
                    f"no exit status within {timeout:g} s; the command may still run on the host",
                    host=self.host,
                    step=step,
                )
            if channel.eof_received:
                # After EOF the select pipe stays readable: wait on the exit status instead.
                channel.status_event.wait(min(remaining, 1.0))
            else:
                select.select([channel], [], [], min(remaining, 1.0))
            _read_ready(channel, out, err)
        _read_ready(channel, out, err)
        session = channel.get_transport()
        if channel.exit_status == -1 and not (session and session.is_active()):
            self.close()
            raise InfrastructureError(
                "the connection was lost while the command ran; it may still run on the host",
                host=self.host,
                step=step,
            )
        return int(channel.exit_status)  # paramiko is untyped; it is an int

    # -- files -----------------------------------------------------------------------------

    def put(self, local_path: str, remote_path: str) -> str:
        """Upload to a partial name, compare SHA-256 on the host, then rename into place."""
        step = f"put {remote_path}"
        expected = local_sha256(local_path, host=self.host, step=step)
        make_remote_parent(self.run, remote_path, host=self.host, step=step)
        partial = temporary_name(remote_path)
        try:
            sftp = self._sftp_client(step)
            sftp.put(local_path, partial, confirm=True)
            found = remote_sha256(self.run, partial, host=self.host, step=step)
            check_digest(found, expected, sides=SENT, host=self.host, step=step)
            sftp.posix_rename(partial, remote_path)
        except BaseException as problem:
            self._forget(partial)
            raise self._file_error(problem, step) from None
        return expected

    def get(self, remote_path: str, local_path: str) -> str:
        """Download to a partial name, compare with the host's SHA-256, then rename into place."""
        step = f"get {remote_path}"
        expected = remote_sha256(self.run, remote_path, host=self.host, step=step)
        try:
            os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
            with partial_file(local_path) as partial:
                self._sftp_client(step).get(
                    remote_path, partial, max_concurrent_prefetch_requests=64
                )
                found = sha256_of_file(partial)
                check_digest(found, expected, sides=RECEIVED, host=self.host, step=step)
                os.replace(partial, local_path)
        except BaseException as problem:
            raise self._file_error(problem, step) from None
        return expected

    def read_from(
        self, path: str, offset: int, *, max_bytes: int = CHUNK_BYTES, whole_lines: bool = False
    ) -> tuple[bytes, int]:
        """Bytes of `path` from `offset` (at most max_bytes); a missing file reads as empty."""
        step = f"read {path}"
        try:
            with self._sftp_client(step).open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(max_bytes)
        except FileNotFoundError:
            return b"", offset
        except BaseException as problem:
            raise self._file_error(problem, step) from None
        if whole_lines:
            data = cut_to_whole_lines(data, max_bytes)
        return data, offset + len(data)

    def _forget(self, partial: str) -> None:
        if self._sftp is None:
            return
        with suppress(OSError, paramiko.SSHException):  # best effort: it is never read
            self._sftp.remove(partial)

    def _file_error(self, problem: BaseException, step: str) -> BaseException:
        known = file_problem(problem, host=self.host, step=step)
        if known is None and isinstance(problem, _TRANSIENT):
            self.close()
            known = _classified(problem, step=step, host=self.host)
        return known or problem

    def _sftp_client(self, step: str) -> paramiko.SFTPClient:
        client = self._connected()
        if self._sftp is None or self._sftp.get_channel().closed:
            try:
                self._sftp = client.open_sftp()
            except _TRANSIENT as problem:
                self.close()
                raise _classified(problem, step=step, host=self.host) from None
            self._sftp.get_channel().settimeout(FILE_TIMEOUT)
        return self._sftp

    # -- connection ------------------------------------------------------------------------

    def _connected(self) -> paramiko.SSHClient:
        if self._client is not None and self.is_alive():
            return self._client
        self.close()
        self._client = with_backoff(
            self._open_client,
            attempts=self.target.connect_attempts,
            budget_s=self.target.connect_timeout,
        )
        return self._client

    def _open_client(self) -> paramiko.SSHClient:
        target = self.target
        pkey = self._private_key()  # a bad key fails here, before any network traffic
        sock = tcp_connect(
            target.address,
            target.port,
            target.connect_timeout,
            keepalive=target.keepalive_seconds,
            host=self.host,
        )
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(_PinnedKeyPolicy())
        if target.host_key:
            pinned = parse_host_key(target.host_key)
            key = paramiko.PKey.from_type_string(pinned.key_type, pinned.blob)
            name = known_hosts_name(target.address, target.port)
            client.get_host_keys().add(name, key.get_name(), key)
        try:
            client.connect(
                hostname=target.address,
                port=target.port,
                username=target.username,
                pkey=pkey,
                sock=sock,
                timeout=target.connect_timeout,
                banner_timeout=target.banner_timeout,
                auth_timeout=target.auth_timeout,
                channel_timeout=target.channel_timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except _TRANSIENT as problem:
            client.close()
            raise _classified(problem, step=STEP_HANDSHAKE, host=self.host) from None
        except BaseException:
            client.close()  # never leak the socket, whatever paramiko raised
            raise
        session = client.get_transport()
        assert session is not None
        session.set_keepalive(max(1, int(target.keepalive_seconds)))
        return client

    def _private_key(self) -> paramiko.PKey:
        if self._pkey is None:
            self._pkey = load_private_key(self.target)
        return self._pkey


def load_private_key(target: SshTarget) -> paramiko.PKey:
    """The target's own key, from its in-memory text (never written to disk) or its key file."""
    where = {"host": target.name, "step": "load private key"}
    try:
        if target.key_path is not None:
            return paramiko.PKey.from_path(target.key_path, password=target.key_passphrase)
        return _key_from_text(target.private_key or "", target.key_passphrase)
    except paramiko.PasswordRequiredException:
        message = "the key is encrypted: give key_passphrase"
        raise SpecError(message, field="private_key", **where) from None
    except (OSError, ValueError, paramiko.SSHException, paramiko.UnknownKeyType) as problem:
        raise SpecError(f"cannot load the key: {problem}", field="private_key", **where) from None


def _key_from_text(text: str, password: str | None) -> paramiko.PKey:
    for key_class in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return key_class.from_private_key(io.StringIO(text), password=password)
        except paramiko.PasswordRequiredException:
            raise
        except (paramiko.SSHException, ValueError):
            continue  # the text holds another kind of key: try the next class
    raise paramiko.SSHException("not an ed25519, ecdsa or rsa private key")


def _drained(channel: paramiko.Channel) -> bool:
    """True once the command has ended and nothing is left to read."""
    ended = channel.closed or (channel.eof_received and channel.exit_status_ready())
    return ended and not channel.recv_ready() and not channel.recv_stderr_ready()


def _read_ready(channel: paramiko.Channel, out: StreamCapture, err: StreamCapture) -> None:
    # Alternate between the streams: both share one flow-control window, so reading only
    # stdout while stderr piles up would let the stderr buffer grow without bound.
    moved = True
    while moved:
        moved = False
        if channel.recv_ready():
            out.feed(channel.recv(READ_BYTES))
            moved = True
        if channel.recv_stderr_ready():
            err.feed(channel.recv_stderr(READ_BYTES))
            moved = True


def _classified(problem: BaseException, *, step: str, host: str) -> InfrastructureError:
    """Map a paramiko or socket failure to an InfrastructureError that names host and step."""
    if isinstance(problem, paramiko.BadHostKeyException):
        return InfrastructureError(
            f"{HOST_KEY_CHANGED}: pinned {problem.expected_key.fingerprint}, the server offered "
            f"{problem.key.get_name()} {problem.key.fingerprint}; nothing was sent",
            permanent=True,
            host=host,
            step=STEP_HOST_KEY,
        )
    if isinstance(problem, _NotPinnedError):
        return InfrastructureError(
            f"host key not pinned; the server offered {problem.key.get_name()} "
            f"{problem.key.fingerprint}: scan and confirm it before connecting",
            permanent=True,
            host=host,
            step=STEP_HOST_KEY,
        )
    if isinstance(problem, paramiko.AuthenticationException):
        return InfrastructureError(
            f"authentication refused: {problem}", permanent=True, host=host, step=STEP_AUTH
        )
    if isinstance(problem, paramiko.IncompatiblePeer):
        return InfrastructureError(f"{problem}", permanent=True, host=host, step=step)
    return InfrastructureError(describe(problem), host=host, step=step)
