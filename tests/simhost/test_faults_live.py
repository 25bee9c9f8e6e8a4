"""Fault knobs on a real `simhost serve` process."""

from __future__ import annotations

import contextlib
import json
import socket
import time

from simhost.faults import CRASH_EXIT_STATUS
from tests.simhost.conftest import run_simhost, wait_until
from tests.simhost.test_server import metrics, post, value


def _complete(server, prompt: str = "hello there", max_tokens: int = 4):
    return post(
        server.url + "/v1/completions",
        {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
    )


def test_it_crashes_with_a_non_zero_status_after_n_requests(serve):
    server = serve("--time-scale", "0.01", "--fault-crash-after-requests", "2")
    assert _complete(server)[0] == 200
    with contextlib.suppress(OSError):  # the process may die before the answer is flushed
        _complete(server)
    assert wait_until(lambda: server.process.poll() is not None, 10)
    assert server.process.returncode == CRASH_EXIT_STATUS
    assert "injected crash" in server.output()


def test_it_crashes_after_t_seconds(serve):
    server = serve("--fault-crash-after-seconds", "0.5")
    assert wait_until(lambda: server.process.poll() is not None, 10)
    assert server.process.returncode == CRASH_EXIT_STATUS


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


def test_a_hang_accepts_connections_but_never_answers(serve):
    server = serve("--time-scale", "0.01", "--fault-hang-after-requests", "1")
    assert _complete(server)[0] == 200
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(1.0)
        try:
            answer = sock.recv(100)
        except TimeoutError:
            answer = None
    assert answer is None
    assert server.process.poll() is None


def test_memory_growth_shows_in_process_metrics_and_in_smi(serve):
    # 3.6e6 MiB per hour is 1 MiB per millisecond: visible within a second
    server = serve("--fault-memory-growth-mib-per-hour", "3600000")
    first = value(metrics(server.url), "process_resident_memory_bytes")
    smi_args = [
        "smi",
        "--format",
        "nvidia-csv",
        "--query-gpu",
        "memory.used",
        "--csv-options",
        "noheader,nounits",
    ]
    before = int(run_simhost(smi_args, server.state_dir).stdout.splitlines()[0])
    time.sleep(0.6)  # the growth is a function of elapsed time: let some pass, no event to wait for
    grown = value(metrics(server.url), "process_resident_memory_bytes") - first
    assert grown > 400 * 2**20
    after = wait_until(
        lambda: int(run_simhost(smi_args, server.state_dir).stdout.splitlines()[0]) > before, 5
    )
    assert after


def test_latency_drift_makes_later_requests_slower(serve):
    # +1.44e6 % per hour is +400 % per second of wall time
    server = serve("--fault-latency-drift-pct-per-hour", "1440000")
    started = time.monotonic()
    _complete(server, max_tokens=8)
    early = time.monotonic() - started
    time.sleep(1.0)  # drift is a function of elapsed time
    started = time.monotonic()
    _complete(server, max_tokens=8)
    late = time.monotonic() - started
    assert late > 2 * early


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
