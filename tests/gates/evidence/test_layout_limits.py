"""What the bundle reader refuses before reading a member: more members than a bundle at the
spec's soak limit can hold, or members that unpack to more bytes than it allows; and a bundle
with tens of thousands of windows' members (a 72 h soak of short windows) reads."""

from __future__ import annotations

import pytest

from gates.evidence import layout
from gates.specs.schema import MAX_SOAK_WINDOWS


def test_a_soak_at_the_window_limit_fits_the_member_limit():
    # Ten raw files a window (collector.window_artifacts keeps at most that many).
    assert layout.MAX_MEMBERS >= MAX_SOAK_WINDOWS * 10 + 10_000


def test_thirty_thousand_members_read_back_byte_for_byte():
    members = {
        f"runs/attempt-1/files/soak/w{seq:06d}/window-line.json": b"{}\n" for seq in range(30_000)
    }
    members[layout.DECISION] = b"{}\n"
    assert layout.read_zip(layout.write_zip(members)) == members


def test_too_many_members_are_refused_before_any_is_read(monkeypatch):
    monkeypatch.setattr(layout, "MAX_MEMBERS", 3)
    data = layout.write_zip({f"m{i}": b"x" for i in range(4)})
    with pytest.raises(layout.BundleFormatError, match="4 members; at most 3"):
        layout.read_zip(data)


def test_members_that_unpack_past_the_size_limit_are_refused(monkeypatch):
    monkeypatch.setattr(layout, "MAX_BUNDLE_BYTES", 1000)
    data = layout.write_zip({"a": b"0" * 600, "b": b"0" * 600})  # compresses to a few bytes
    with pytest.raises(layout.BundleFormatError, match="unpack to 1,200 bytes; at most 1,000"):
        layout.read_zip(data)
