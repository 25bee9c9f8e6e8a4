"""gunicorn's access log never carries a credential (issue 12 item 6): the redaction rules,
then a real gunicorn with config/gunicorn.py answering requests that carry one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from config.gunicorn import redact_query, redact_uri
from tests.sshd import wait_for

ROOT = Path(__file__).resolve().parents[2]
SECRET = "tg_abcdef123456_s3cr3tVALUEthatMustNotBeLogged"


@pytest.mark.parametrize(
    ("query", "redacted"),
    [
        (f"token={SECRET}", "token=[redacted]"),
        (f"after=3&access_token={SECRET}&x=1", "after=3&access_token=[redacted]&x=1"),
        (f"API_KEY={SECRET}", "API_KEY=[redacted]"),
        (f"pass%77ord={SECRET}", "pass%77ord=[redacted]"),  # the name is read decoded
        ("figure=1&after=20", "figure=1&after=20"),
        ("", ""),
    ],
)
def test_auth_looking_query_parameters_are_redacted(query, redacted):
    assert redact_query(query) == redacted


def test_a_uri_keeps_its_path_and_loses_only_the_secret():
    assert redact_uri(f"/api/v1/runs/1/?sig={SECRET}&a=b") == "/api/v1/runs/1/?sig=[redacted]&a=b"
    assert redact_uri("/healthz") == "/healthz"


@pytest.fixture
def gunicorn(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "access.log"
    command = [sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn"]
    command += ["config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    command += ["--access-logfile", str(log), "--access-logformat", LOG_FORMAT]
    server = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, "TOLLGATE_ENV_FILE": ""}, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/static/nothing"), timeout=30)
        yield f"http://127.0.0.1:{port}", log
    finally:
        server.terminate()
        server.wait(timeout=10)


# gunicorn's default format plus the query, the raw URI and both secret headers.
LOG_FORMAT = '%(h)s "%(r)s" %(s)s "%(f)s" q=%(q)s %({raw_uri}e)s %({authorization}i)s %({cookie}i)s'


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def test_gunicorns_access_log_carries_no_token_from_a_query_or_a_header(gunicorn):
    base, log = gunicorn
    request = urllib.request.Request(
        f"{base}/api/v1/engagements/?token={SECRET}&after=1",
        headers={
            "Authorization": f"Bearer {SECRET}",
            "Cookie": f"sessionid={SECRET}",
            "Referer": f"{base}/x?password={SECRET}",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code in (401, 403)
    text = wait_for(lambda: "/api/v1/engagements/" in log.read_text() and log.read_text())
    assert SECRET not in text
    assert "/api/v1/engagements/?token=[redacted]&after=1" in text
    assert "password=[redacted]" in text and "q=token=[redacted]&after=1" in text
