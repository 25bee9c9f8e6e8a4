"""XID events read from the kernel log: a real log without any, and the driver's line layout
under both timestamp formats the profiles use (see tests/fixtures/kernel-log/PROVENANCE.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from runners import adapters
from runners.adapters.kernel_log import parse_kernel_log
from tests.runners.adapters.golden import FIXTURES

DMESG_ISO = (
    "2026-12-01T10:00:00,000000+00:00 nvidia-peermem: module loaded\n"
    "2026-12-01T10:15:30,250000+00:00 NVRM: Xid (PCI:0000:3b:00): 79, pid=2210, "
    "name=python3, GPU has fallen off the bus.\n"
    "2026-12-01T10:16:00,000000+00:00 NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', "
    "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 1, SM 0)\n"
)
JOURNAL_SHORT_ISO = (
    "2026-12-01T11:15:30+0100 gpu-07 kernel: NVRM: Xid (PCI:0000:5d:00): 48, pid=901, "
    "name=vllm, An uncorrectable double bit error (DBE) has been detected on GPU in the "
    "framebuffer at partition 6, subpartition 0.\n"
)


def test_a_real_log_without_xid_lines_has_no_events():
    text = (FIXTURES / "kernel-log" / "debian12-firecracker-vm__dmesg_iso.txt").read_text()
    assert parse_kernel_log(text) == {"tool": "kernel-log", "xid_events": []}


def test_each_xid_line_gives_its_gpu_code_time_and_class():
    events = parse_kernel_log(DMESG_ISO)["xid_events"]
    assert [(e["pci"], e["code"], e["critical"]) for e in events] == [
        ("0000:3b:00", 79, True),
        ("0000:cb:00", 13, False),  # a program's fault, not the host's
    ]
    assert events[0]["time"] == datetime(2026, 12, 1, 10, 15, 30, 250000, UTC).timestamp()
    assert events[0]["text"].endswith("GPU has fallen off the bus.")


def test_journalctl_short_iso_with_an_offset_reads_the_same_moment():
    (event,) = parse_kernel_log(JOURNAL_SHORT_ISO)["xid_events"]
    assert (event["pci"], event["code"], event["critical"]) == ("0000:5d:00", 48, True)
    assert event["time"] == datetime(2026, 12, 1, 10, 15, 30, tzinfo=UTC).timestamp()


def test_a_line_without_a_readable_time_keeps_the_event_with_no_time():
    (event,) = parse_kernel_log("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 94, Contained\n")[
        "xid_events"
    ]
    assert (event["code"], event["time"]) == (94, None)


def test_an_empty_log_is_a_fact_not_an_error():
    assert adapters.parse(b"", tool="kernel-log")["xid_events"] == []
