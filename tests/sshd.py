"""Real OpenSSH sshd for tests: on loopback, or inside a network namespace behind a veth pair.

Small API for any test module (the transport tests, the end-to-end gate tests):

    with loopback_sshd(tmp_path) as server:      # SshServer, running
        target = server.target()                  # SshTarget with the pinned key and user key
        server.restart(); server.regenerate_host_key()
    with netns_sshd(tmp_path) as server:         # NamespacedServer: same, plus the link
        server.link_down(); server.link_up()

Everything is torn down on exit, even when starting failed halfway. Needs root for netns.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil

from runners.transport import SshTarget

SSHD = "/usr/sbin/sshd"
START_DEADLINE = 10.0
PRIVSEP_DIR = "/run/sshd"  # sshd refuses to start without its privilege-separation directory

_CONFIG = """\
ListenAddress {address}
Port {port}
HostKey {host_key}
PidFile {workdir}/sshd.pid
AuthorizedKeysFile {workdir}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
UseDNS no
MaxStartups 50
MaxSessions 20
Subsystem sftp internal-sftp
LogLevel VERBOSE
SetEnv SHLVL=1 PYTHONPATH={repo}
"""
# The emulated host over SSH must run this checkout's simhost: a login shell has no PYTHONPATH,
# and the interpreter's editable install may point at another checkout of Tollgate.
REPO = Path(__file__).resolve().parents[1]


def generate_key(path: Path, comment: str = "tollgate-test", key_type: str = "ed25519") -> str:
    """A fresh key pair at path / path.pub; returns the public key line."""
    for stale in (path, path.with_name(path.name + ".pub")):
        stale.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return _key_line(path.with_name(path.name + ".pub"))


def _key_line(public_path: Path) -> str:
    key_type, blob = public_path.read_text().split()[:2]
    return f"{key_type} {blob}"


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


class SshServer:
    """One sshd process serving `username` (root) with a generated host key and user key."""

    def __init__(
        self,
        workdir: Path,
        *,
        address: str = "127.0.0.1",
        port: int | None = None,
        host_key_type: str = "ed25519",
    ) -> None:
        self.workdir = workdir
        self.address = address
        self.port = port or free_port(address)
        self.username = "root"
        self.host_key_type = host_key_type
        self.host_key_path = workdir / f"ssh_host_{host_key_type}_key"
        self.user_key_path = workdir / "id_ed25519"
        self.host_key_line = generate_key(self.host_key_path, "tollgate-test-host", host_key_type)
        self.user_key_line = generate_key(self.user_key_path, "tollgate-test-user")
        (workdir / "authorized_keys").write_text(self.user_key_line + "\n")
        self.process: subprocess.Popen[bytes] | None = None
        self._fixed_port = port is not None

    @property
    def user_key_text(self) -> str:
        return self.user_key_path.read_text()

    def target(self, **overrides: Any) -> SshTarget:
        """A target with the pinned host key and the user key in memory; override any field."""
        fields: dict[str, Any] = {
            "name": f"sshd-{self.port}",
            "address": self.address,
            "port": self.port,
            "username": self.username,
            "host_key": self.host_key_line,
            "private_key": self.user_key_text,
            "connect_timeout": 5.0,
            "banner_timeout": 5.0,
            "auth_timeout": 5.0,
            "channel_timeout": 5.0,
        }
        fields.update(overrides)
        return SshTarget(**fields)

    def start(self) -> None:
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        for _ in range(5):
            self._write_config()
            self.process = self._spawn()
            if self._wait_until_serving():
                return
            self._reap()
            if self._fixed_port or "Address already in use" not in self.log_text():
                break
            self.port = free_port(self.address)  # another test took the port: pick again
        raise RuntimeError(f"sshd did not start on {self.address}:{self.port}:\n{self.log_text()}")

    def stop(self) -> None:
        """Stop the listener and every connection it serves: clients see their link reset."""
        if self.process is None:
            return
        with suppress(psutil.NoSuchProcess):
            children = psutil.Process(self.process.pid).children(recursive=True)
            for child in children:
                with suppress(psutil.NoSuchProcess):
                    child.kill()
        self.process.terminate()
        self._reap()

    def restart(self) -> None:
        self.stop()
        self.start()

    def regenerate_host_key(self) -> str:
        """Replace the host key (as a reinstalled host would) and restart if running."""
        running = self.process is not None
        self.stop()
        self.host_key_line = generate_key(
            self.host_key_path, "tollgate-test-host", self.host_key_type
        )
        if running:
            self.start()
        return self.host_key_line

    def log_text(self) -> str:
        log = self.workdir / "sshd.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def command_prefix(self) -> list[str]:
        return []

    def _write_config(self) -> None:
        text = _CONFIG.format(
            address=self.address,
            port=self.port,
            host_key=self.host_key_path,
            workdir=self.workdir,
            repo=REPO,
        )
        (self.workdir / "sshd_config").write_text(text)

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [SSHD, "-D", "-e", "-f", str(self.workdir / "sshd_config")]
        with open(self.workdir / "sshd.log", "ab") as log:
            return subprocess.Popen(
                [*self.command_prefix(), *command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

    def _wait_until_serving(self) -> bool:
        """Poll until the server sends its SSH banner, or sshd exits, or the deadline passes."""
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            if self._banner_seen():
                return True
            time.sleep(0.02)  # poll interval while the listener comes up
        return False

    def _banner_seen(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=1.0) as probe:
                return probe.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    def _reap(self) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> SshServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NetworkNamespace:
    """A network namespace joined to this one by a veth pair on a unique /30 subnet."""

    def __init__(self) -> None:
        tag = secrets.token_hex(4)
        self.name = f"tollgate-{tag}"
        self.host_veth = f"tgh{tag}"  # interface names are limited to 15 characters
        self.ns_veth = f"tgn{tag}"
        self.host_ip, self.ns_ip = _free_subnet()

    def create(self) -> None:
        try:
            _ip("netns", "add", self.name)
            _ip("link", "add", self.host_veth, "type", "veth", "peer", "name", self.ns_veth)
            _ip("link", "set", self.ns_veth, "netns", self.name)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_veth)
            _ip("link", "set", self.host_veth, "up")
            _ip("-n", self.name, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_veth)
            _ip("-n", self.name, "link", "set", self.ns_veth, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
        except BaseException:
            self.destroy()
            raise

    def link_down(self) -> None:
        """Cut the host off: its side of the cable goes down, packets to it are lost."""
        _ip("-n", self.name, "link", "set", self.ns_veth, "down")

    def link_up(self) -> None:
        _ip("-n", self.name, "link", "set", self.ns_veth, "up")

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def destroy(self) -> None:
        """Kill what still runs inside, then remove the namespace and both veth ends."""
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            with suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        subprocess.run(["ip", "link", "del", self.host_veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


class NamespacedServer(SshServer):
    """sshd inside a NetworkNamespace, listening on the namespace side of the veth pair."""

    def __init__(self, workdir: Path, namespace: NetworkNamespace) -> None:
        self.namespace = namespace
        # A fresh namespace has every port free, so the standard one is used.
        super().__init__(workdir, address=namespace.ns_ip, port=22)

    def command_prefix(self) -> list[str]:
        return self.namespace.exec_prefix()

    def link_down(self) -> None:
        self.namespace.link_down()

    def link_up(self) -> None:
        self.namespace.link_up()


@contextmanager
def loopback_sshd(workdir: Path, *, host_key_type: str = "ed25519") -> Iterator[SshServer]:
    server = SshServer(workdir, host_key_type=host_key_type)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextmanager
def netns_sshd(workdir: Path) -> Iterator[NamespacedServer]:
    namespace = NetworkNamespace()
    namespace.create()
    try:
        server = NamespacedServer(workdir, namespace)
        try:
            server.start()
            yield server
        finally:
            server.stop()
    finally:
        namespace.destroy()


def netns_available() -> bool:
    """True when this process may create network namespaces (root with iproute2)."""
    return os.geteuid() == 0 and shutil.which("ip") is not None


def wait_for(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.05):
    """Poll until condition() is truthy and return its value; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)  # the polling interval, not a wait for the event itself


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")


def _free_subnet() -> tuple[str, str]:
    """Two addresses of a random /30 in 10.200.0.0/13 not already on any interface here."""
    taken = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    while True:
        second, third, fourth = secrets.randbelow(8), secrets.randbelow(256), secrets.randbelow(64)
        prefix = f"10.{200 + second}.{third}."
        if f"{prefix}{fourth * 4 + 1}/" not in taken and f"{prefix}{fourth * 4 + 2}/" not in taken:
            return f"{prefix}{fourth * 4 + 1}", f"{prefix}{fourth * 4 + 2}"
