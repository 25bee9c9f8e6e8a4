"""Host key lines and fingerprints (runners/transport/hostkeys.py), checked against ssh-keygen."""

from __future__ import annotations

import base64
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.errors import SpecError
from runners.transport.hostkeys import parse_host_key

# Captured from `ssh-keygen -t ... ; ssh-keygen -lf key.pub` (OpenSSH 9.2).
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEwExgkuCNvin9jTT8GDOLDr1WBbKB3XvPP8+cC2ErCi c"
ED25519_FINGERPRINT = "SHA256:RCMvciqLbc6x97W4F++AChPVNvc7NNOJg4fXgQdHu2o"
ECDSA = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBMP6Fihv21TT2VQcs1K8"
    "fgWvnn5phy6EPHX6RKu4aS3tTN0ILsKvdu73cLy36BdquYMRo+6XE4c7qGx3j3UrGhU= root@vm"
)
ECDSA_FINGERPRINT = "SHA256:PLpyBbtNHpEiQ8njcktsXLQ9Qq2dmRaTF7bW9QkUE2Y"


@pytest.mark.parametrize(
    ("line", "fingerprint"), [(ED25519, ED25519_FINGERPRINT), (ECDSA, ECDSA_FINGERPRINT)]
)
def test_it_computes_the_fingerprint_ssh_keygen_prints(line, fingerprint):
    assert parse_host_key(line).fingerprint == fingerprint


def test_it_drops_the_comment_from_the_normalized_line():
    assert parse_host_key(ED25519).line == ED25519.rsplit(" ", 1)[0]


def test_it_agrees_with_ssh_keygen_on_a_fresh_key(tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")])
    listed = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True, text=True
    )
    line = (tmp_path / "k.pub").read_text()
    assert parse_host_key(line).fingerprint == listed.stdout.split()[1]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "ssh-ed25519",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        "ssh-ed25519 not*base64",
        "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x07ssh-rsa").decode(),
        "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\xffshort").decode(),
        "ssh-ed25519 AAA",
    ],
)
def test_it_refuses_a_line_that_is_not_a_public_key(line):
    with pytest.raises(SpecError) as caught:
        parse_host_key(line)
    assert caught.value.field == "host_key"


@given(st.text(max_size=200))
def test_it_parses_or_refuses_any_text_without_crashing(text):
    try:
        key = parse_host_key(text)
    except SpecError:
        return
    assert key.fingerprint.startswith("SHA256:")
