"""Fixtures for simhost tests: real `python -m simhost serve` processes on free loopback ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # copies of shared/fixtures files


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def simhost_env(state_dir: Path) -> dict:
    env = dict(os.environ)
    env["SIMHOST_STATE_DIR"] = str(state_dir)
    env["PYTHONPATH"] = str(REPO)
    env.pop("SIMHOST_HOST_CONFIG", None)
    return env


def run_simhost(args, state_dir: Path, timeout: float = 60.0, **kwargs):
    """Run `python -m simhost ARGS` to completion and return the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "simhost", *args],
        env=kwargs.pop("env", None) or simhost_env(state_dir),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    state_dir: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=0.5) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def start_server(tmp_path: Path, *args: str, deadline_s: float = 15.0) -> Server:
    """Start a server on a free port and wait for /health; retries a port taken meanwhile."""
    state_dir = tmp_path / "state"
    for attempt in range(3):
        port = free_port()
        log = tmp_path / f"serve-{port}-{attempt}.log"
        with open(log, "w") as handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "simhost", "serve", "--port", str(port), *args],
                env=simhost_env(state_dir),
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
        server = Server(process, port, state_dir, log)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if healthy(server.url):
                return server
            if process.poll() is not None:
                break
            time.sleep(0.05)
        server.stop()
        if "cannot listen" not in server.output():
            raise AssertionError("simhost serve did not start:\n" + server.output())
    raise AssertionError("no free port for simhost serve")


@pytest.fixture
def serve(tmp_path):
    """Factory: serve(*flags) -> Server; every server is stopped at teardown."""
    started = []

    def factory(*args: str, deadline_s: float = 15.0) -> Server:
        server = start_server(tmp_path, *args, deadline_s=deadline_s)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


def wait_until(predicate, deadline_s: float, interval: float = 0.05, *, what: str = ""):
    """Poll `predicate` until it returns something truthy and return that; fail at the deadline
    with `what` (the awaited fact, in words) in the message."""
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"{what or 'the condition'} did not hold within {deadline_s} s")
        time.sleep(interval)  # the polling interval, not a wait for the event itself
