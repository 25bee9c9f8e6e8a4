"""Shared helpers of the simhost benchmarks: start a `simhost serve`, run `simhost bench`.

Not a test. Imports only the standard library; talks to simhost through its command line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(state_dir: str) -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), SIMHOST_STATE_DIR=state_dir)


class Server:
    """A `python -m simhost serve` child process on a free loopback port."""

    def __init__(self, flags: list[str]) -> None:
        self.state_dir = tempfile.mkdtemp(prefix="simhost-bench-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.state_dir, "serve.log"), "w")  # noqa: SIM115
        command = [sys.executable, "-m", "simhost", "serve", "--port", str(self.port), *flags]
        self.process = subprocess.Popen(
            command, env=_env(self.state_dir), stdout=self.log, stderr=subprocess.STDOUT
        )
        self._wait_healthy(30.0)

    def _wait_healthy(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("simhost serve did not become healthy")

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=15)
        self.log.close()


def run_bench(server: Server, flags: list[str]) -> dict:
    """Run `simhost bench` with --save-detailed against the server; return the result."""
    result = os.path.join(server.state_dir, f"result-{time.monotonic_ns()}.json")
    command = [sys.executable, "-m", "simhost", "bench", "--base-url", server.url]
    command += [*flags, "--save-result", "--save-detailed", "--result-filename", result]
    done = subprocess.run(command, env=_env(server.state_dir), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("simhost bench failed: " + done.stderr)
    with open(result) as handle:
        return json.load(handle)


def quantile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
