from __future__ import annotations

import os
import subprocess
import sys

from simhost.host.statefile import (
    ServerState,
    read_live_states,
    remove_state,
    state_dir,
    write_state,
)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_written_state_is_read_back_while_its_process_lives(tmp_path):
    state = ServerState(
        pid=os.getpid(), port=8000, memory_used_mib=[1.0, 2.0], utilization_pct=[5.0, 6.0]
    )
    write_state(str(tmp_path), state)
    assert read_live_states(str(tmp_path)) == [state]
    remove_state(str(tmp_path), os.getpid())
    assert read_live_states(str(tmp_path)) == []


def test_the_state_of_a_dead_server_is_ignored(tmp_path):
    write_state(str(tmp_path), ServerState(_dead_pid(), 1, [9.0], [9.0]))
    assert read_live_states(str(tmp_path)) == []


def test_broken_files_and_a_missing_folder_are_skipped(tmp_path):
    (tmp_path / "serve-1.json").write_text("{half")
    assert read_live_states(str(tmp_path)) == []
    assert read_live_states(str(tmp_path / "absent")) == []


def test_the_folder_comes_from_the_environment_or_a_per_user_default():
    assert state_dir({"SIMHOST_STATE_DIR": "/x"}) == "/x"
    assert state_dir({}).endswith(f"simhost-state-{os.getuid()}")
