"""A PostgreSQL server of one test's own (initdb and pg_ctl into a temporary directory, on a
free loopback port), so a fault test can restart it without touching the shared server on
127.0.0.1:5432. The binaries are Debian's (/usr/lib/postgresql/N/bin, as bin/ensure-services
installs them); initdb refuses root, so the server runs as the postgres user when root.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.sshd import free_port, wait_for


def postgres_bin() -> Path | None:
    """The newest installed server's bin directory (pg_config on PATH names only the client)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    try:
        return int(Path(path).parts[-3])
    except ValueError:
        return 0


class OwnPostgres:
    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.port = free_port()
        # Not under pytest's tmp_path: that is root's 0700 tree, the postgres user cannot enter.
        self.root = Path(tempfile.mkdtemp(prefix="tollgate-pg-"))
        self.data = self.root / "data"

    def _as_server_user(self, argv: list[str], **options) -> subprocess.CompletedProcess:
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, **options)

    def start(self) -> OwnPostgres:
        if self.bin is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        if not self.data.exists():
            made = self._as_server_user(
                [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust"]
            )
            if made.returncode != 0:
                raise RuntimeError(f"initdb failed:\n{made.stdout}{made.stderr}")
        self._pg_ctl("start", "-w", "-t", "60")
        wait_for(self.ready, timeout=60)
        return self

    def stop(self) -> None:
        self._pg_ctl("stop", "-m", "fast", "-w", "-t", "60")

    def ready(self) -> bool:
        ready = [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        return subprocess.run(ready).returncode == 0

    def create_database(self, name: str) -> None:
        created = self.psql(f'CREATE DATABASE "{name}"')
        if created.returncode != 0:
            raise RuntimeError(created.stderr)

    def psql(self, sql: str) -> subprocess.CompletedProcess:
        argv = ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-c", sql]
        return subprocess.run(argv, capture_output=True, text=True)

    def remove(self) -> None:
        if self.data.exists():
            self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "30")
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options]
        argv += ["-l", str(self.root / "server.log"), *args]
        self._as_server_user(argv, timeout=120)
