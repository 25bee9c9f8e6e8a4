"""Fault knobs on a real `simhost serve` process, judged by what the server reports (its
answers, /metrics, exit status, log and smi state), never by sleeping for a fixed time."""

from __future__ import annotations

import contextlib
import json
import socket
import time

import pytest

from simhost.server.faults import CRASH_EXIT_STATUS
from tests.simhost.conftest import run_simhost, wait_until
from tests.simhost.server.test_server import metrics, post, value

CRASH_AFTER_S = 3.0  # long enough that start-up's health check never races the crash
# A healthy /health answers in milliseconds, so silence for this long is a hang, not a delay.
HANG_PROBE_S = 1.0
SMI_MEMORY_USED = [
    "smi",
    "--format",
    "nvidia-csv",
    "--query-gpu",
    "memory.used",
    "--csv-options",
    "noheader,nounits",
]


def _complete(server, prompt: str = "hello there", max_tokens: int = 4):
    return post(
        server.url + "/v1/completions",
        {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
    )


def _exited(server) -> bool:
    return server.process.poll() is not None


def test_it_crashes_with_a_non_zero_status_after_n_requests(serve):
    server = serve("--time-scale", "0.01", "--fault-crash-after-requests", "2")
    assert _complete(server)[0] == 200
    assert value(metrics(server.url), "vllm:request_success_total") == 1
    assert not _exited(server)
    with contextlib.suppress(OSError):  # the process may die before the answer is flushed
        _complete(server)
    wait_until(lambda: _exited(server), 10, what="the crash after the second request")
    assert server.process.returncode == CRASH_EXIT_STATUS
    assert "injected crash" in server.output()


def test_it_crashes_after_t_seconds(serve):
    launched = time.monotonic()
    server = serve("--fault-crash-after-seconds", str(CRASH_AFTER_S))
    wait_until(lambda: _exited(server), CRASH_AFTER_S + 20, what="the timed crash")
    assert server.process.returncode == CRASH_EXIT_STATUS
    assert "injected crash" in server.output()
    # The server's clock starts after its process does: load can only lengthen this lifetime.
    assert time.monotonic() - launched >= CRASH_AFTER_S


def test_an_error_rate_of_one_answers_every_completion_with_a_500(serve):
    server = serve("--time-scale", "0.01", "--fault-error-rate", "1")
    for _ in range(3):
        status, body = _complete(server)
        assert status == 500 and body["error"]["type"] == "InternalServerError"
    assert value(metrics(server.url), "vllm:request_success_total", finished_reason="error") == 3


def test_a_fault_file_sets_the_same_knobs(serve, tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"error_rate": 1.0}))
    server = serve("--time-scale", "0.01", "--fault-file", str(faults))
    assert _complete(server)[0] == 500


def test_a_hang_after_n_requests_still_answers_the_n_th_however_long_it_takes(serve):
    # Long enough that the state writer's fault check (twice a second) runs mid-request: a hang
    # counted on requests taken in, not answered, froze this answer on a busy box.
    server = serve("--time-scale", "1.0", "--fault-hang-after-requests", "1")
    launched = time.monotonic()
    status, body = _complete(server, max_tokens=256)
    assert status == 200 and body["usage"]["completion_tokens"] == 256
    assert time.monotonic() - launched > 1.0  # the check ran at least twice meanwhile
    assert "injected hang" in server.output()


def test_a_hang_accepts_connections_but_never_answers(serve):
    server = serve("--time-scale", "0.01", "--fault-hang-after-requests", "1")
    assert _complete(server)[0] == 200
    # The server decides to hang before that answer is written, so its log already says so.
    assert "injected hang" in server.output()
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(HANG_PROBE_S)
        with pytest.raises(TimeoutError):
            sock.recv(100)
    assert not _exited(server)


def _resident_bytes(server) -> float:
    return value(metrics(server.url), "process_resident_memory_bytes")


def _smi_memory_used_mib(server) -> int:
    return int(run_simhost(SMI_MEMORY_USED, server.state_dir).stdout.splitlines()[0])


def test_memory_growth_shows_in_process_metrics_and_in_smi(serve):
    # 3.6e6 MiB per hour is 1 MiB per millisecond: 400 MiB within half a second
    server = serve("--fault-memory-growth-mib-per-hour", "3600000")
    first = _resident_bytes(server)
    # smi reads the state file the server writes twice a second: wait for its first one, which
    # shows vLLM's reservation (0.9 of 81559 MiB), before taking it as the baseline.
    before = wait_until(
        lambda: (used := _smi_memory_used_mib(server)) > 60000 and used,
        10,
        what="smi showing the server's reserved memory",
    )
    wait_until(
        lambda: _resident_bytes(server) - first > 400 * 2**20,
        10,
        what="/metrics RSS 400 MiB above its first scrape",
    )
    wait_until(
        lambda: _smi_memory_used_mib(server) > before,
        10,
        what="smi memory.used above its first reading",
    )


def _e2e_seconds(server) -> float:
    """One completion's end-to-end latency as the server timed it (its histogram's growth)."""
    before = value(metrics(server.url), "vllm:e2e_request_latency_seconds_sum")
    assert _complete(server, max_tokens=8)[0] == 200
    return value(metrics(server.url), "vllm:e2e_request_latency_seconds_sum") - before


def test_latency_drift_makes_later_requests_slower(serve):
    # +1.44e6 % per hour is +400 % per second: every engine step takes 1 + 4 t times as long,
    # t seconds after start. Two slow answers in a row, not one, so a single stall of this
    # shared machine cannot stand in for the drift.
    server = serve("--fault-latency-drift-pct-per-hour", "1440000")
    early = _e2e_seconds(server)
    wait_until(
        lambda: min(_e2e_seconds(server), _e2e_seconds(server)) > 4 * early,
        30,
        interval=0,
        what=f"two answers in a row each timed at over 4x the first ({early:.3f} s)",
    )


def test_wrong_output_breaks_greedy_equivalence_only_with_offload_on(serve):
    body = {"prompt": "check greedy equivalence", "max_tokens": 16, "temperature": 0}
    resident = serve("--time-scale", "0.01", "--fault-wrong-output-rate", "1")
    offload = serve(
        "--time-scale", "0.01", "--kv-offloading-size", "8", "--fault-wrong-output-rate", "1"
    )
    reference = post(resident.url + "/v1/completions", body)[1]["choices"][0]["text"]
    corrupted = post(offload.url + "/v1/completions", body)[1]["choices"][0]["text"]
    clean = serve("--time-scale", "0.01")
    assert post(clean.url + "/v1/completions", body)[1]["choices"][0]["text"] == reference
    assert corrupted != reference
    assert corrupted.split()[0] == reference.split()[0]
