"""Detached processes (runners/transport/detached.py) on both transports: the same sh scripts
run locally and through a real sshd, so every behaviour test runs twice."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from runners.errors import InfrastructureError, SpecError
from runners.transport import LocalTransport, open_transport
from runners.transport.detached import parse_facts, status_from_facts
from tests.sshd import wait_for

LONG = ["/bin/sh", "-c", 'echo started; echo "$$" >> starts; sleep 300 & echo "$!" > child; wait']


def alive(pid: int) -> bool:
    """Same machine as the sshd: read the process table directly, counting zombies as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def child_pid(run_dir: str) -> int:
    path = Path(run_dir) / "child"
    return int(wait_for(lambda: path.exists() and path.read_text().strip()))


def test_a_launched_process_runs_as_its_own_group_with_a_fresh_heartbeat(any_transport, run_dirs):
    run_dir = run_dirs("a")
    launch = any_transport.launch_detached(run_dir, "tok-1", LONG, heartbeat_seconds=1)
    status = launch.status
    assert not launch.adopted
    assert status.running and status.group_alive
    assert status.pid == status.pgid
    assert status.heartbeat_age is not None and status.heartbeat_age < 5
    assert status.exit_code is None
    assert Path(run_dir, "token").read_text() == "tok-1\n"


def test_the_heartbeat_keeps_beating_while_the_process_runs(any_transport, run_dirs):
    run_dir = run_dirs("beat")
    any_transport.launch_detached(run_dir, "tok", LONG, heartbeat_seconds=1)
    first = Path(run_dir, "heartbeat").read_text()
    wait_for(lambda: Path(run_dir, "heartbeat").read_text() != first, timeout=5)
    assert any_transport.status(run_dir).heartbeat_age < 3


def test_files_uploaded_into_the_run_directory_before_launch_are_kept(
    any_transport, run_dirs, tmp_path
):
    run_dir = run_dirs("inputs")
    source = tmp_path / "agent.py"
    source.write_text("print('agent ran')\n")
    any_transport.put(str(source), f"{run_dir}/agent.py")
    argv = ["/bin/sh", "-c", "python3 agent.py"]
    launch = any_transport.launch_detached(run_dir, "tok", argv)
    assert not launch.adopted
    wait_for(lambda: any_transport.status(run_dir).finished)
    assert Path(run_dir, "stdout.log").read_text() == "agent ran\n"


def test_a_second_launch_with_the_same_token_adopts_the_running_process(any_transport, run_dirs):
    run_dir = run_dirs("adopt")
    first = any_transport.launch_detached(run_dir, "tok-1", LONG)
    wait_for(lambda: Path(run_dir, "starts").exists())
    second = any_transport.launch_detached(run_dir, "tok-1", ["/bin/sh", "-c", "echo other"])
    assert second.adopted
    assert second.status.pid == first.status.pid
    assert Path(run_dir, "starts").read_text().count("\n") == 1


def test_a_launch_with_another_token_is_refused_and_leaves_the_process_alone(
    any_transport, run_dirs
):
    run_dir = run_dirs("conflict")
    first = any_transport.launch_detached(run_dir, "tok-1", LONG)
    with pytest.raises(InfrastructureError) as caught:
        any_transport.launch_detached(run_dir, "tok-2", LONG)
    assert caught.value.permanent
    assert "belongs to another launch" in str(caught.value)
    assert f"launch {run_dir}" in str(caught.value)
    assert alive(first.status.pid)


def test_kill_ends_the_whole_process_group_children_included(any_transport, run_dirs):
    run_dir = run_dirs("kill")
    launch = any_transport.launch_detached(run_dir, "tok", LONG)
    child = child_pid(run_dir)
    result = any_transport.kill(run_dir, grace=5)
    assert result.signals == ("TERM",)
    assert not alive(child) and not alive(launch.status.pid)
    status = any_transport.status(run_dir)
    assert not status.running and not status.group_alive
    assert status.exit_code == 143  # the wrapper records its child's death by SIGTERM


def test_kill_escalates_to_sigkill_when_the_group_ignores_sigterm(any_transport, run_dirs):
    run_dir = run_dirs("stubborn")
    stubborn = ["/bin/sh", "-c", "trap '' TERM; echo $$ > child; while :; do sleep 1; done"]
    any_transport.launch_detached(run_dir, "tok", stubborn)
    child = child_pid(run_dir)
    result = any_transport.kill(run_dir, grace=1)
    assert result.signals == ("TERM", "KILL")
    assert not alive(child)
    assert not any_transport.status(run_dir).group_alive


def test_kill_of_a_finished_or_missing_run_sends_nothing(any_transport, run_dirs):
    run_dir = run_dirs("done")
    any_transport.launch_detached(run_dir, "tok", ["/bin/true"])
    wait_for(lambda: any_transport.status(run_dir).finished)
    assert any_transport.kill(run_dir).signals == ()
    assert any_transport.kill(run_dirs("never-made")).signals == ()


def test_the_exit_code_and_both_logs_are_kept(any_transport, run_dirs):
    run_dir = run_dirs("exit")
    script = "echo out; echo err >&2; exit 7"
    any_transport.launch_detached(run_dir, "tok", ["/bin/sh", "-c", script])
    status = wait_for(lambda: (s := any_transport.status(run_dir)).finished and s)
    assert status.exit_code == 7 and not status.running and not status.vanished
    assert any_transport.read_from(f"{run_dir}/stdout.log", 0) == (b"out\n", 4)
    assert any_transport.read_from(f"{run_dir}/stderr.log", 0) == (b"err\n", 4)


def test_environment_values_reach_the_process_literally(any_transport, run_dirs):
    run_dir = run_dirs("env")
    value = "a b; $(touch pwned) 'quoted'"
    argv = ["/bin/sh", "-c", 'printf %s "$TOLLGATE_VALUE"']
    any_transport.launch_detached(run_dir, "tok", argv, env={"TOLLGATE_VALUE": value})
    wait_for(lambda: any_transport.status(run_dir).finished)
    assert Path(run_dir, "stdout.log").read_text() == value
    assert not Path(run_dir, "pwned").exists()


def test_a_process_killed_behind_our_back_is_reported_as_vanished(any_transport, run_dirs):
    run_dir = run_dirs("vanished")
    launch = any_transport.launch_detached(run_dir, "tok", LONG)
    child = child_pid(run_dir)
    os.kill(launch.status.pid, signal.SIGKILL)  # only the wrapper: its children live on
    status = wait_for(lambda: (s := any_transport.status(run_dir)).vanished and s)
    assert status.exit_code is None and status.group_alive
    any_transport.kill(run_dir, grace=1)
    assert not alive(child)


def test_a_changed_boot_id_means_rebooted_and_nothing_is_signalled(any_transport, run_dirs):
    run_dir = run_dirs("reboot")
    launch = any_transport.launch_detached(run_dir, "tok", LONG)
    pid_file = Path(run_dir, "pid")
    original = pid_file.read_text()
    pid, pgid, start, _boot = original.split()
    pid_file.write_text(f"{pid} {pgid} {start} 00000000-0000-0000-0000-000000000000\n")
    status = any_transport.status(run_dir)
    assert status.rebooted and not status.running and status.heartbeat_age is None
    assert any_transport.kill(run_dir).signals == ()
    assert alive(launch.status.pid)
    pid_file.write_text(original)


def test_a_reused_pid_is_not_taken_for_the_process(any_transport, run_dirs):
    run_dir = run_dirs("reused")
    launch = any_transport.launch_detached(run_dir, "tok", LONG)
    pid_file = Path(run_dir, "pid")
    original = pid_file.read_text()
    pid, pgid, start, boot = original.split()
    pid_file.write_text(f"{pid} {pgid} {int(start) + 1} {boot}\n")
    assert not any_transport.status(run_dir).running
    assert any_transport.kill(run_dir).signals == ()  # never signal a stranger's group
    assert alive(launch.status.pid)
    pid_file.write_text(original)


def test_cleanup_kills_and_removes_the_run_directory(any_transport, run_dirs):
    run_dir = run_dirs("clean")
    launch = any_transport.launch_detached(run_dir, "tok", LONG)
    any_transport.cleanup(run_dir)
    assert not Path(run_dir).exists()
    assert not alive(launch.status.pid)
    assert not any_transport.status(run_dir).exists
    any_transport.cleanup(run_dir)  # twice is harmless


def test_cleanup_refuses_a_directory_that_is_not_a_run_directory(any_transport, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data").write_text("keep me")
    with pytest.raises(InfrastructureError) as caught:
        any_transport.cleanup(str(precious))
    assert "not a run directory" in str(caught.value)
    assert (precious / "data").exists()


def test_read_from_tails_a_growing_file_in_whole_lines(any_transport, tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b'{"seq": 1}\n{"seq": 2}\n{"se')
    data, offset = any_transport.read_from(str(path), 0, whole_lines=True)
    assert data == b'{"seq": 1}\n{"seq": 2}\n'
    with path.open("ab") as handle:
        handle.write(b'q": 3}\n')
    more, end = any_transport.read_from(str(path), offset, whole_lines=True)
    assert more == b'{"seq": 3}\n' and end == path.stat().st_size
    assert any_transport.read_from(str(path), end) == (b"", end)


def test_read_from_pages_with_max_bytes_and_a_missing_file_reads_empty(any_transport, tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"0123456789")
    assert any_transport.read_from(str(path), 2, max_bytes=3) == (b"234", 5)
    assert any_transport.read_from(str(tmp_path / "nothing"), 7) == (b"", 7)


def test_a_single_line_longer_than_max_bytes_is_handed_over_in_pieces(any_transport, tmp_path):
    path = tmp_path / "long"
    path.write_bytes(b"x" * 10)
    assert any_transport.read_from(str(path), 0, max_bytes=4, whole_lines=True) == (b"xxxx", 4)


@pytest.mark.parametrize(
    ("run_dir", "token", "argv", "env", "field"),
    [
        ("relative/run", "tok", ["true"], None, "run_dir"),
        ("/tmp", "tok", ["true"], None, "run_dir"),
        ("/tmp/run dir", "tok", ["true"], None, "run_dir"),
        ("/tmp/x/run", "tok en", ["true"], None, "token"),
        ("/tmp/x/run", "", ["true"], None, "token"),
        ("/tmp/x/run", "tok", [], None, "argv"),
        ("/tmp/x/run", "tok", ["a\x00"], None, "argv"),
        ("/tmp/x/run", "tok", ["true"], {"BAD-NAME": "x"}, "env"),
        ("/tmp/x/run", "tok", ["A=B"], {"OK": "x"}, "argv"),
    ],
)
def test_a_bad_launch_request_is_a_spec_error_naming_the_field(run_dir, token, argv, env, field):
    with pytest.raises(SpecError) as caught:
        LocalTransport().launch_detached(run_dir, token, argv, env=env)
    assert caught.value.field == field


def test_two_racing_launches_with_one_token_start_one_process(run_dirs):
    run_dir = run_dirs("race")
    results = []

    def launch() -> None:
        results.append(LocalTransport().launch_detached(run_dir, "tok", LONG))

    threads = [threading.Thread(target=launch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(result.adopted for result in results) == [False, True, True, True]
    assert len({result.status.pid for result in results}) == 1
    wait_for(lambda: Path(run_dir, "starts").exists())
    assert Path(run_dir, "starts").read_text().count("\n") == 1


@pytest.mark.slow
def test_a_detached_process_outlives_the_ssh_connection_that_started_it(sshd, run_dirs):
    run_dir = run_dirs("outlive")
    with open_transport(sshd.target()) as first:
        launch = first.launch_detached(run_dir, "tok", LONG)
    with open_transport(sshd.target()) as second:
        status = second.status(run_dir)
        assert status.running and status.pid == launch.status.pid
        assert second.launch_detached(run_dir, "tok", LONG).adopted
        second.kill(run_dir)
    assert not alive(launch.status.pid)


def test_status_parsing_treats_a_zombie_as_dead():
    facts = parse_facts(
        "exists=1\ntoken=t\nboot_now=b\nuptime=100.5\npid=42\npgid=42\nstart=7\nboot=b\n"
        "now_state=Z\nnow_start=7\nheartbeat=99.0\n"
    )
    status = status_from_facts("/r/x", facts)
    assert not status.running and status.vanished
    assert status.heartbeat_age == pytest.approx(1.5)
