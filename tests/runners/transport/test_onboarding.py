"""Host onboarding against a real sshd: scanning the host key, and the connection check."""

from __future__ import annotations

import subprocess

import pytest

from runners.errors import InfrastructureError, SpecError
from runners.transport import check_connection, scan_host_key
from runners.transport.hostkeys import parse_host_key
from tests.sshd import free_port, generate_key

pytestmark = pytest.mark.slow


def test_scan_returns_the_servers_key_and_the_fingerprint_ssh_keygen_shows(own_sshd):
    line, fingerprint = scan_host_key(own_sshd.address, own_sshd.port, timeout=5)
    assert line == own_sshd.host_key_line
    listed = subprocess.run(
        ["ssh-keygen", "-lf", f"{own_sshd.host_key_path}.pub"], capture_output=True, text=True
    )
    assert fingerprint == listed.stdout.split()[1]
    assert parse_host_key(line).fingerprint == fingerprint


def test_scan_never_authenticates(own_sshd):
    scan_host_key(own_sshd.address, own_sshd.port, timeout=5)
    assert "Accepted" not in own_sshd.log_text()
    assert "Failed" not in own_sshd.log_text()


def test_scan_of_a_closed_port_is_a_transient_error_naming_the_address():
    port = free_port()
    with pytest.raises(InfrastructureError) as caught:
        scan_host_key("127.0.0.1", port, timeout=2)
    assert not caught.value.permanent
    assert f"127.0.0.1:{port}" in str(caught.value)


def test_a_healthy_host_passes_every_check(sshd):
    report = check_connection(sshd.target(), required_tools=["sh", "/bin/ls"])
    assert report.ok, report
    names = [check.name for check in report.checks]
    assert names == [
        "reachable",
        "host key",
        "authentication",
        "posix shell",
        "python3",
        "tool sh",
        "tool /bin/ls",
    ]
    assert report.check("python3").message.startswith("python3 3.")


def test_a_missing_tool_fails_only_its_own_check(sshd):
    report = check_connection(sshd.target(), required_tools=["nvidia-smi-not-here", "sh"])
    assert not report.ok
    assert report.check("tool nvidia-smi-not-here").ok is False
    assert report.check("tool nvidia-smi-not-here").message == "not found on PATH"
    assert report.check("tool sh").ok and report.check("python3").ok


def test_a_changed_host_key_fails_the_host_key_check_without_raising(own_sshd):
    old_key = own_sshd.host_key_line
    own_sshd.regenerate_host_key()
    report = check_connection(own_sshd.target(host_key=old_key))
    assert [(check.name, check.ok) for check in report.checks] == [
        ("reachable", True),
        ("host key", False),
    ]
    assert "host key changed" in report.check("host key").message


def test_a_refused_user_key_fails_the_authentication_check(sshd, tmp_path):
    generate_key(tmp_path / "other")
    report = check_connection(sshd.target(private_key=(tmp_path / "other").read_text()))
    assert report.check("host key").ok
    assert not report.check("authentication").ok


def test_a_closed_port_fails_the_reachable_check_as_transient(sshd):
    target = sshd.target(port=free_port(), connect_timeout=1.0, connect_attempts=1)
    report = check_connection(target)
    assert [(check.name, check.ok) for check in report.checks] == [("reachable", False)]
    assert "transient" in report.check("reachable").message


def test_an_unreadable_private_key_fails_its_own_check_before_connecting(sshd):
    report = check_connection(sshd.target(private_key="not a key"))
    assert [(check.name, check.ok) for check in report.checks] == [("private key", False)]


def test_a_bad_tool_name_is_a_spec_error(sshd):
    with pytest.raises(SpecError) as caught:
        check_connection(sshd.target(), required_tools=["ls; id"])
    assert caught.value.field == "required_tools"


def test_a_run_directory_is_created_and_checked_writable(sshd, tmp_path):
    run_dir = tmp_path / "runs" / "tollgate"
    report = check_connection(sshd.target(), run_dir=str(run_dir))
    assert report.check("run directory writable").ok, report
    assert run_dir.is_dir() and not list(run_dir.iterdir())  # the probe file is removed


def test_a_run_directory_that_cannot_be_made_fails_its_own_check(sshd, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    report = check_connection(sshd.target(), run_dir=f"{blocker}/runs")
    check = report.check("run directory writable")
    assert check is not None and not check.ok and "cannot create" in check.message
    assert report.check("python3").ok  # the other checks still ran


def test_a_run_directory_with_shell_syntax_is_a_spec_error(sshd):
    with pytest.raises(SpecError):
        check_connection(sshd.target(), run_dir="/tmp/$(id)")
