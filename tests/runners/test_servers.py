"""The server step's port rules: free before a launch (or held by this run's own adopted
server), and a healthy answer counts only from the process group the run launched; and a
launch whose answer an outage lost is adopted by its token. Pure rules first, then the serve
and bench steps on this machine with real processes listening."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runners.errors import InfrastructureError
from runners.program.perform import StepContext, perform
from runners.server.port import Listener, require_answered_by, require_port_free
from runners.transport import DetachedStatus, LocalTransport
from tests.simhosts import free_port
from tests.sshd import wait_for

# Answers 200 to every GET with one vLLM metric, like a healthy server; prints "ready".
HEALTHY_SERVER = (
    "import http.server, sys\n"
    "class Handler(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200); self.end_headers()\n"
    "        self.wfile.write(b'vllm:num_requests_running 0\\n')\n"
    "    def log_message(self, *args):\n"
    "        pass\n"
    "server = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), Handler)\n"
    "print('ready', flush=True)\n"
    "server.serve_forever()\n"
)
OURS = DetachedStatus(run_dir="/r/serve-a", exists=True, pid=100, pgid=100, running=True)
OURS_ALIVE = DetachedStatus(run_dir="/r/serve-a", exists=True, pid=100, pgid=100, group_alive=True)
NOT_LAUNCHED = DetachedStatus(run_dir="/r/serve-a", exists=False)


def held(*pgids: int) -> Listener:
    processes = tuple(
        {"pid": 200 + i, "pgid": pgid, "command": "x"} for i, pgid in enumerate(pgids)
    )
    return Listener(port=8000, listening=True, processes=processes)


FREE = Listener(port=8000, listening=False)
HIDDEN = Listener(port=8000, listening=True)  # listening, but the account sees no process


@pytest.mark.parametrize(
    ("found", "own", "allowed"),
    [
        (FREE, NOT_LAUNCHED, True),
        (held(100), OURS_ALIVE, True),  # our launch whose answer was lost: adopted
        (held(100), NOT_LAUNCHED, False),
        (held(300), OURS_ALIVE, False),
        (held(100, 300), OURS_ALIVE, False),  # SO_REUSEPORT: a stranger shares the port
        (HIDDEN, OURS_ALIVE, False),
    ],
)
def test_a_launch_needs_the_port_free_or_held_by_our_own_server(found, own, allowed):
    if allowed:
        require_port_free(found, own, host="gpu-01", step="serve")
        return
    with pytest.raises(InfrastructureError) as refused:
        require_port_free(found, own, host="gpu-01", step="serve")
    assert refused.value.permanent and "already in use by" in str(refused.value)


@pytest.mark.parametrize(
    ("found", "own", "ours"),
    [
        (held(100), OURS, True),
        (held(300), OURS, False),
        (held(100, 300), OURS, False),
        (HIDDEN, OURS, False),
        (FREE, OURS, False),
        (held(100), OURS_ALIVE, False),  # the launched wrapper itself is gone
    ],
)
def test_a_healthy_answer_counts_only_from_the_launched_process_group(found, own, ours):
    if ours:
        require_answered_by(found, own, host="gpu-01", step="serve")
        return
    with pytest.raises(InfrastructureError) as refused:
        require_answered_by(found, own, host="gpu-01", step="serve")
    assert refused.value.permanent and "not the server this run launched" in str(refused.value)


def test_the_error_names_the_foreign_pid_and_command():
    with pytest.raises(InfrastructureError) as refused:
        require_port_free(held(300), NOT_LAUNCHED, host="gpu-01", step="serve")
    assert "pid 200 (x)" in str(refused.value) and "port 8000" in str(refused.value)


@pytest.fixture
def context(tmp_path: Path):
    """A run on this machine whose resident server is HEALTHY_SERVER on a free port."""
    port = free_port()
    (tmp_path / "scratch").mkdir()
    ctx = StepContext(
        transport=LocalTransport("gpu-local"),
        commands={"serve": {"resident": ["{python}", "-c", HEALTHY_SERVER, "{port}"]}},
        values={"python": sys.executable, "port": port, "host_address": "127.0.0.1"},
        run_dir=str(tmp_path / "runs" / "run-1-abc"),
        token="run-abc",
        scratch=tmp_path / "scratch",
        serve_timeout_s=30,
    )
    perform({"name": "prepare host", "kind": "prepare"}, {}, ctx)
    yield ctx
    for path in (tmp_path / "runs" / "run-1-abc").glob("serve-*"):
        ctx.transport.kill(str(path), grace=1)


SERVE = {"name": "s1: start", "kind": "serve", "arm": "a", "arm_kind": "resident", "session": "s1"}


def listening(port: int) -> bool:
    return LocalTransport().run(["python3", "-c", _CONNECT, str(port)], timeout=10).ok


_CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1)"


def test_a_launch_whose_answer_was_lost_is_adopted_and_proves_itself(context):
    launched = perform(SERVE, {}, context)
    assert wait_for(lambda: listening(context.values["port"]), timeout=15)
    again = perform(SERVE, {}, context)  # the first answer never reached the worker
    assert again.detail["run_dir"] == launched.detail["run_dir"]
    healthy = perform(SERVE, launched.detail, context)
    assert healthy.done and "healthy after" in healthy.log


def test_a_healthy_answer_from_a_foreign_process_is_infra_error_naming_it(context):
    context.commands["serve"]["resident"] = ["{python}", "-c", "import time; time.sleep(60)"]
    launched = perform(SERVE, {}, context)  # the port was free: our server never listens
    foreign = subprocess.Popen(
        [sys.executable, "-c", HEALTHY_SERVER, str(context.values["port"])],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert foreign.stdout.readline().strip() == "ready"
        with pytest.raises(InfrastructureError) as refused:
            perform(SERVE, launched.detail, context)
        assert refused.value.permanent and f"pid {foreign.pid}" in str(refused.value)
        assert "not the server this run launched" in str(refused.value)
    finally:
        foreign.kill()
        foreign.wait(timeout=10)


BENCH = {
    "name": "g3 a c=1 r1",
    "kind": "bench",
    "arm": "a",
    "arm_kind": "resident",
    "tier": 1,
    "repetition": 1,
    "workload": {"dataset": "random", "num_prompts": 4, "seed": 1, "output_len": 8},
    "seed": 1,
}


def test_a_bench_launch_whose_answer_was_lost_is_adopted_with_its_first_before_scrape(context):
    context.commands["bench"] = {"random": ["{python}", "-c", "import time; time.sleep(60)"]}
    perform(SERVE, {}, context)
    assert wait_for(lambda: listening(context.values["port"]), timeout=15)
    scraped = perform(BENCH, {}, context)
    assert "metrics_before" in scraped.detail and not scraped.detail.get("launched")
    launched = perform(BENCH, scraped.detail, context)
    first_pid = context.transport.status(launched.detail["run_dir"]).pid
    again = perform(BENCH, scraped.detail, context)  # the launch's answer never arrived
    assert again.detail["run_dir"] == launched.detail["run_dir"]
    assert "metrics_before" not in again.detail and not again.artifacts  # no second scrape
    assert context.transport.status(again.detail["run_dir"]).pid == first_pid  # adopted
