"""The SSH transport (runners/transport/ssh.py) against a real OpenSSH sshd on loopback."""

from __future__ import annotations

import hashlib
import os
import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.errors import InfrastructureError, SpecError
from runners.transport import open_transport, scan_host_key
from runners.transport.hostkeys import parse_host_key
from tests.sshd import generate_key, loopback_sshd, wait_for

pytestmark = pytest.mark.slow

MIB = 1 << 20


def injection_corpus(marker: Path) -> list[str]:
    """Values that would run something, split, or be read as an option if quoted wrongly."""
    m = str(marker)
    return [
        f"; touch {m}", f"; touch {m} #", f"&& touch {m}", f"|| touch {m}", f"| touch {m}",
        f"& touch {m}", f"$(touch {m})", f"`touch {m}`", f"\ntouch {m}", f"\rtouch {m}",
        f"'; touch {m}; '", f'"; touch {m}; "', f"\\'; touch {m}; #", f"${{IFS}}touch${{IFS}}{m}",
        f"$(IFS=_;cmd=touch_{m};$cmd)", f"> {m}", f">> {m}", f"< /etc/passwd > {m}",
        f"{m}'\"'\"'", f"x'$(touch {m})'", f'x"$(touch {m})"', f"$((1+1))$(touch {m})",
        f"{{touch,{m}}}", f"a\n$(touch {m})\nb", f"\t; touch {m}", f"\x0b; touch {m}",
        "$(id)", "`id`", "$HOME", "${HOME}", "$0", "$$", "$?", "$@", "$*", "$1",
        "*", "/*", "~", "~root", "?", "[a-z]*", "!", "!!", "#", "# comment",
        "-", "--", "-rf", "--help", "-e", "-n", "--version=1",
        "", " ", "  two  spaces  ", "\n", "\n\n", "tab\there", "back\\slash", "\\",
        "'", '"', "''", '""', "it's", 'say "hi"', "%s", "%n%n%n", "%%",
        "unicode: caf\u00e9 \u00fc\u00df \u65e5\u672c\u8a9e \U0001f600", "\u202eRTL override",
        "\u00a0nbsp", "\u2028line sep", "\x01\x02\x7f control", "\x1b[31mred\x1b[0m",
        "a" * 10_000, "$(touch " + "x" * 5000 + ")", ";" * 1000, "'" * 999,
    ]  # fmt: skip


def test_the_injection_corpus_is_big_enough(tmp_path):
    assert len(injection_corpus(tmp_path / "m")) >= 50


def test_every_corpus_value_arrives_as_one_literal_argument(ssh_transport, tmp_path):
    marker = tmp_path / "pwned"
    for value in injection_corpus(marker):
        result = ssh_transport.run(["printf", "%s|%s", value, "end"], timeout=10)
        assert result.stdout == f"{value}|end", value
        assert result.exit_code == 0
    assert not marker.exists()


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=300
    )
)
def test_generated_text_arrives_as_one_literal_argument(ssh_transport, value):
    # printf reuses its format for the second argument: exactly two words must arrive.
    result = ssh_transport.run(["printf", "%s|", value, "second"], timeout=10)
    assert result.stdout == f"{value}|second|"


def test_20_mib_on_stdout_and_stderr_at_once_completes(ssh_transport):
    script = (
        "head -c 20971520 /dev/zero | tr '\\0' o & "
        "head -c 20971520 /dev/zero | tr '\\0' e >&2; wait; echo END; echo END >&2; exit 3"
    )
    started = time.monotonic()
    result = ssh_transport.run(["/bin/sh", "-c", script], timeout=120)
    assert result.exit_code == 3
    assert result.truncated
    assert len(result.stdout) == MIB and result.stdout.endswith("ooooEND\n")
    assert len(result.stderr) == MIB and result.stderr.endswith("eeeeEND\n")
    assert time.monotonic() - started < 60


def test_lines_stream_to_the_callback_while_the_command_runs(ssh_transport, tmp_path):
    go = tmp_path / "go"
    seen: list[tuple[str, str]] = []

    def on_line(stream: str, line: str) -> None:
        seen.append((stream, line))
        if line == "one":
            go.touch()

    # The command prints "two" only once the callback has seen "one": if lines reached the
    # callback only after the command ended, it would never end (and the run would time out).
    wait = f"until [ -e {shlex.quote(str(go))} ]; do sleep 0.02; done"
    script = f"echo one; echo warn >&2; {wait}; echo two"
    result = ssh_transport.run(["/bin/sh", "-c", script], timeout=30, on_line=on_line)
    # stdout and stderr are separate channels: their relative order is not the command's.
    assert [line for stream, line in seen if stream == "stdout"] == ["one", "two"]
    assert [line for stream, line in seen if stream == "stderr"] == ["warn"]
    assert result.stdout == "one\ntwo\n"


def test_exit_codes_and_stderr_come_back(ssh_transport):
    result = ssh_transport.run(["/bin/sh", "-c", "echo oops >&2; exit 42"], timeout=10)
    assert (result.exit_code, result.stderr, result.ok) == (42, "oops\n", False)
    assert ssh_transport.run(["no-such-program-here"], timeout=10).exit_code == 127


def test_a_command_killed_by_a_signal_has_a_negative_exit_code(ssh_transport):
    assert ssh_transport.run(["/bin/sh", "-c", "kill -9 $$"], timeout=10).exit_code < 0


def test_a_command_timeout_is_transient_and_the_next_command_reconnects(ssh_transport):
    started = time.monotonic()
    with pytest.raises(InfrastructureError) as caught:
        ssh_transport.run(["sleep", "30"], timeout=1)
    assert time.monotonic() - started < 3
    assert not caught.value.permanent
    assert "step run sleep" in str(caught.value) and "sshd-" in str(caught.value)
    assert ssh_transport.run(["echo", "again"], timeout=10).stdout == "again\n"


def test_one_connection_serves_many_commands(sshd, ssh_transport):
    for _ in range(5):
        ssh_transport.run(["true"], timeout=10)
    peers = ssh_transport.run(["/bin/sh", "-c", 'echo "$SSH_CLIENT"'], timeout=10).stdout
    first_port = peers.split()[1]
    again = ssh_transport.run(["/bin/sh", "-c", 'echo "$SSH_CLIENT"'], timeout=10).stdout
    assert again.split()[1] == first_port  # same client port: the same TCP connection


def test_it_reconnects_after_sshd_restarts(own_sshd):
    with open_transport(own_sshd.target()) as transport:
        assert transport.run(["echo", "before"], timeout=10).ok
        own_sshd.restart()
        assert transport.run(["echo", "after"], timeout=10).stdout == "after\n"


def test_sshd_down_is_a_transient_error_within_the_connect_budget(own_sshd):
    own_sshd.stop()
    target = own_sshd.target(connect_timeout=2.0)
    started = time.monotonic()
    with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
        transport.run(["true"], timeout=10)
    assert time.monotonic() - started < 4
    assert not caught.value.permanent
    assert "Connection refused" in str(caught.value)
    assert "step tcp connect" in str(caught.value)
    own_sshd.start()
    with open_transport(target) as transport:
        assert transport.run(["true"], timeout=10).ok


def test_a_peer_that_accepts_but_never_speaks_fails_on_the_banner_timeout(sshd):
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never sends a banner
        target = sshd.target(port=silent.getsockname()[1], connect_timeout=1.0, banner_timeout=1.0)
        started = time.monotonic()
        with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
            transport.run(["true"], timeout=10)
    assert time.monotonic() - started < 3
    assert not caught.value.permanent
    assert "step ssh handshake" in str(caught.value)


def test_a_changed_host_key_is_refused_permanently_with_both_fingerprints(own_sshd, tmp_path):
    old_key = own_sshd.host_key_line
    new_key = own_sshd.regenerate_host_key()
    marker = tmp_path / "ran"
    target = own_sshd.target(host_key=old_key)
    with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
        transport.run(["touch", str(marker)], timeout=10)
    message = str(caught.value)
    assert caught.value.permanent
    assert "host key changed" in message
    assert parse_host_key(old_key).fingerprint in message
    assert parse_host_key(new_key).fingerprint in message
    assert "step host key check" in message and f"host sshd-{own_sshd.port}" in message
    assert not marker.exists()
    assert "Accepted publickey" not in own_sshd.log_text()


@pytest.mark.parametrize("key_type", ["rsa", "ecdsa"])
def test_rsa_and_ecdsa_host_keys_can_be_scanned_and_pinned_too(tmp_path, key_type):
    with loopback_sshd(tmp_path, host_key_type=key_type) as server:
        line, _ = scan_host_key(server.address, server.port, timeout=5)
        assert line == server.host_key_line
        with open_transport(server.target(host_key=line)) as transport:
            assert transport.run(["echo", "ok"], timeout=10).stdout == "ok\n"


def test_an_unpinned_host_key_is_refused_and_its_fingerprint_shown(sshd, tmp_path):
    marker = tmp_path / "ran"
    target = sshd.target(host_key="")
    with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
        transport.run(["touch", str(marker)], timeout=10)
    assert caught.value.permanent
    assert "not pinned" in str(caught.value)
    assert parse_host_key(sshd.host_key_line).fingerprint in str(caught.value)
    assert not marker.exists()


def test_a_refused_key_is_a_permanent_authentication_error(sshd, tmp_path):
    generate_key(tmp_path / "stranger")
    target = sshd.target(private_key=(tmp_path / "stranger").read_text())
    with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
        transport.run(["true"], timeout=10)
    assert caught.value.permanent
    assert "step authentication" in str(caught.value)


def test_it_never_falls_back_to_an_agent_or_default_key_files(sshd, tmp_path, monkeypatch):
    # The right key sits in an agent and in ~/.ssh; the target's own (wrong) key must be all
    # that is offered, so the login fails.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(sshd.user_key_text)
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL)
    try:
        env = {**os.environ, "SSH_AUTH_SOCK": str(socket_path)}
        wait_for_socket(socket_path)
        subprocess.run(
            ["ssh-add", str(sshd.user_key_path)], env=env, check=True, capture_output=True
        )
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        monkeypatch.setenv("HOME", str(home))
        generate_key(tmp_path / "wrong")
        target = sshd.target(private_key=(tmp_path / "wrong").read_text())
        with open_transport(target) as transport, pytest.raises(InfrastructureError) as caught:
            transport.run(["true"], timeout=10)
        assert "step authentication" in str(caught.value)
    finally:
        agent.terminate()
        agent.wait()


def wait_for_socket(path: Path) -> None:
    wait_for(path.exists, timeout=5)


def test_a_key_limited_by_restrict_still_runs_commands_and_moves_files(own_sshd, tmp_path):
    # What docs/transport.md tells customers they may set on Tollgate's key.
    authorized = own_sshd.workdir / "authorized_keys"
    authorized.write_text(f'restrict,from="127.0.0.1" {own_sshd.user_key_line}\n')
    (tmp_path / "in.txt").write_text("data")
    with open_transport(own_sshd.target()) as transport:
        assert transport.run(["echo", "ok"], timeout=10).stdout == "ok\n"
        transport.put(str(tmp_path / "in.txt"), str(tmp_path / "out" / "in.txt"))
        transport.launch_detached(str(tmp_path / "runs" / "r"), "tok", ["/bin/true"])
    assert (tmp_path / "out" / "in.txt").read_text() == "data"


def test_a_key_file_path_works_instead_of_key_text(sshd):
    target = sshd.target(private_key=None, key_path=str(sshd.user_key_path))
    with open_transport(target) as transport:
        assert transport.run(["echo", "ok"], timeout=10).stdout == "ok\n"


def test_an_encrypted_key_needs_its_passphrase(sshd, tmp_path):
    key = tmp_path / "locked"
    subprocess.run(["cp", str(sshd.user_key_path), str(key)], check=True)
    subprocess.run(["ssh-keygen", "-q", "-p", "-N", "s3cret", "-f", str(key)], check=True)
    with pytest.raises(SpecError) as caught:
        open_transport(sshd.target(private_key=key.read_text())).run(["true"], timeout=10)
    assert caught.value.field == "private_key" and "key_passphrase" in str(caught.value)
    target = sshd.target(private_key=key.read_text(), key_passphrase="s3cret")
    with open_transport(target) as transport:
        assert transport.run(["true"], timeout=10).ok


def test_private_key_text_never_shows_in_the_target_repr(sshd):
    target = sshd.target(key_passphrase="s3cret")
    assert "PRIVATE KEY" not in repr(target) and "s3cret" not in repr(target)


def test_garbage_key_text_is_a_spec_error_before_any_connection(sshd):
    with pytest.raises(SpecError) as caught:
        open_transport(sshd.target(private_key="not a key")).run(["true"], timeout=10)
    assert caught.value.field == "private_key"


def test_put_and_get_move_files_verified_by_sha256(ssh_transport, tmp_path):
    payload = os.urandom(3 * MIB + 123)
    source = tmp_path / "payload.bin"
    source.write_bytes(payload)
    remote = tmp_path / "remote" / "nested" / "payload.bin"
    digest = ssh_transport.put(str(source), str(remote))
    assert digest == hashlib.sha256(payload).hexdigest()
    assert remote.read_bytes() == payload
    back = tmp_path / "back" / "payload.bin"
    assert ssh_transport.get(str(remote), str(back)) == digest
    assert back.read_bytes() == payload
    leftovers = [p.name for p in (*remote.parent.iterdir(), *back.parent.iterdir())]
    assert sorted(leftovers) == ["payload.bin", "payload.bin"]


def test_get_of_a_missing_file_is_a_permanent_error_and_writes_nothing(ssh_transport, tmp_path):
    local = tmp_path / "local.bin"
    with pytest.raises(InfrastructureError) as caught:
        ssh_transport.get(str(tmp_path / "absent.bin"), str(local))
    assert caught.value.permanent and "absent.bin" in str(caught.value)
    assert not local.exists()


def test_put_of_a_missing_local_file_is_a_permanent_error(ssh_transport, tmp_path):
    with pytest.raises(InfrastructureError) as caught:
        ssh_transport.put(str(tmp_path / "absent"), str(tmp_path / "remote"))
    assert caught.value.permanent and "step put" in str(caught.value)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"port": 0}, "port"),
        ({"address": "bad host"}, "address"),
        ({"username": "root; id"}, "username"),
        ({"host_key": "ssh-ed25519 garbage!"}, "host_key"),
        ({"key_path": "/k"}, "private_key"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"name": ""}, "name"),
    ],
)
def test_a_bad_target_is_refused_with_the_field_named(sshd, override, field):
    with pytest.raises(SpecError) as caught:
        sshd.target(**override)
    assert caught.value.field == field
