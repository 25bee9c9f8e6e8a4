"""`manage.py demo` on the embedded defaults: SQLite, a file-system broker, no servers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SETTING_NAMES = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "DEBUG",
    "SECRET_KEY",
    "SECURE_SSL_REDIRECT",
    "STATIC_MANIFEST",
    "WHITENOISE_USE_FINDERS",
    "ALLOWED_HOSTS",
    "EMAIL_BACKEND",
    "TOLLGATE_VAR_DIR",
)


def embedded_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SETTING_NAMES}
    env.update(DEBUG="true", TOLLGATE_VAR_DIR=str(var_dir), TOLLGATE_ENV_FILE="")
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_demo_once_sets_up_the_world_and_reports_every_step(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "demo", "--once"],
        cwd=ROOT,
        env=embedded_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vendor" in result.stdout and "password" in result.stdout
    summary = result.stdout.split("Demo summary:")[1]
    assert "FAIL" not in summary
    # Both engagements were walked for real: G1 and G2 pass, and G3 got a verdict.
    for title in (
        "480B long-context agents (offload helps)",
        "8B short chat (offload does not help)",
    ):
        for kind in ("G1", "G2"):
            assert f"{title} {kind}: pass" in summary, summary
        assert f"{title} G3: " in summary
    helps = summary.split("(offload helps) G3: ")[1].split(":")[0]
    short = summary.split("(offload does not help) G3: ")[1].split(":")[0]
    assert helps in ("pass", "inconclusive") and short in ("fail", "inconclusive")
    assert (tmp_path / "tollgate.sqlite3").exists()


@pytest.mark.slow
def test_demo_serves_the_login_page_with_web_worker_and_beat(tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--address", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=embedded_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        body = poll_page(f"http://127.0.0.1:{port}/login/", deadline_s=90, process=process)
        assert "Log in" in body
        assert '<link rel="stylesheet"' in body
        css = poll_page(f"http://127.0.0.1:{port}/static/gates/gates.css", 10, process)
        assert "--pass" in css
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def poll_page(url: str, deadline_s: float, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read().decode()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode()
        except OSError:
            time.sleep(0.2)  # polling the server until it answers, with a deadline
    raise AssertionError(f"{url} did not answer within {deadline_s} s")
