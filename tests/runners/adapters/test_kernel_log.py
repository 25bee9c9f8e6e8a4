"""XID events read from the kernel log: a real log without any, and the driver's line layout
under both timestamp formats the profiles use (see tests/fixtures/kernel-log/PROVENANCE.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

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


def test_xid_events_say_their_vendor_and_kind():
    (event,) = parse_kernel_log(JOURNAL_SHORT_ISO)["xid_events"]
    assert (event["vendor"], event["kind"]) == ("nvidia", "xid")


# amdgpu's lines in the layouts the driver prints them (runners/adapters/amdgpu_log.py cites the
# source of each): "amdgpu <PCI>: amdgpu: <text>" from dev_err/dev_info, "amdgpu <PCI>: {N}<text>"
# from RAS_EVENT_LOG, as a real MI300X log shows (tests/fixtures/kernel-log/PROVENANCE.md).
AMDGPU_LINES = [
    (
        "amdgpu 0000:dd:00.0: {3}socket: 1, die: 0, 2 new uncorrectable hardware errors "
        "detected in umc block",
        "ras_uncorrectable",
        True,
    ),
    (
        "amdgpu 0000:03:00.0: amdgpu: 1 uncorrectable hardware errors detected in UMC block",
        "ras_uncorrectable",  # kernels before the per-socket lines
        True,
    ),
    (
        "amdgpu 0000:dd:00.0: {4}socket: 1, die: 0, 1 new deferred hardware errors detected "
        "in umc block",
        "ras_deferred",
        True,
    ),
    (
        "amdgpu 0000:68:00.0: {14}poison is consumed by client 12, kick off gpu reset flow",
        "ras_poison",
        True,
    ),
    ("amdgpu 0000:68:00.0: {15}Poison is created", "ras_poison", True),
    (
        "amdgpu 0000:dd:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
        "ras_fatal",
        True,
    ),
    (
        "amdgpu 0000:5f:00.0: amdgpu: Saved bad pages 130 reaches threshold value 128",
        "bad_pages",
        True,
    ),
    ("amdgpu 0000:dd:00.0: amdgpu: GPU reset(2) failed", "reset_failed", True),
    ("amdgpu 0000:62:00.0: amdgpu: Mode2 reset failed!", "reset_failed", True),
    # What a faulting program causes: recorded, not a host fault.
    ("amdgpu 0000:dd:00.0: amdgpu: GPU reset begin!", "gpu_reset", False),
    (
        "amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=8, emitted seq=10",
        "ring_timeout",
        False,
    ),
    (
        "amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 "
        "pasid:32770)",
        "page_fault",
        False,
    ),
    (
        "amdgpu 0000:0b:00.0: [mmhub] page fault (src_id:0 ring:0 vmid:0 pasid:0)",
        "page_fault",
        False,
    ),
]


@pytest.mark.parametrize(("line", "kind", "critical"), AMDGPU_LINES)
def test_each_amdgpu_fault_line_gives_its_gpu_kind_and_class(line, kind, critical):
    text = f"2026-12-01T10:15:30,250000+00:00 {line}\n"
    (event,) = parse_kernel_log(text)["xid_events"]
    assert (event["vendor"], event["kind"], event["critical"]) == ("amd", kind, critical)
    assert event["pci"] == line.split()[1].rstrip(":")
    assert event["code"] is None
    assert event["time"] == datetime(2026, 12, 1, 10, 15, 30, 250000, UTC).timestamp()
    assert not event["text"].startswith(("amdgpu:", "{"))  # the driver's prefixes are dropped


@pytest.mark.parametrize(
    "line",
    [
        # counts of zero, correctable errors and the running totals are no new fault
        "amdgpu 0000:dd:00.0: {3}socket: 1, die: 0, 0 new uncorrectable hardware errors "
        "detected in umc block",
        "amdgpu 0000:9d:00.0: {1}socket: 6, die: 1, 1533 new correctable hardware errors "
        "detected in xgmi_wafl block",
        "amdgpu 0000:dd:00.0: {3}socket: 1, die: 0, 2 uncorrectable hardware errors detected "
        "in total in umc block",
        "amdgpu 0000:dd:00.0: amdgpu: GPU reset(2) succeeded!",
        "amdgpu 0000:dd:00.0: amdgpu: Dumping IP State",
        "[drm] VRAM is lost due to GPU reset!",
    ],
)
def test_amdgpu_lines_that_report_no_fault_give_no_event(line):
    assert parse_kernel_log(f"2026-12-01T10:15:30,000000+00:00 {line}\n")["xid_events"] == []


def test_journalctl_prefixes_amdgpu_lines_with_the_host_and_kernel():
    text = (
        "2026-12-01T11:15:30+0100 gpu-07 kernel: amdgpu 0000:C1:00.0: {7}uncorrectable "
        "hardware error(ERREVENT_ATHUB_INTERRUPT) detected!\n"
    )
    (event,) = parse_kernel_log(text)["xid_events"]
    assert (event["pci"], event["kind"]) == ("0000:c1:00.0", "ras_fatal")
    assert event["time"] == datetime(2026, 12, 1, 10, 15, 30, tzinfo=UTC).timestamp()
