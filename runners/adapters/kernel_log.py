"""GPU fault events in the kernel log (`dmesg --time-format iso` or `journalctl -k -o
short-iso`): NVIDIA's XIDs and amdgpu's RAS, reset and fault lines (runners.adapters.amdgpu_log).

nvidia-smi has no XID field (`-q` and `--query-gpu` report none; only NVML's event API and DCGM
do), so the driver's own log line is the source: "NVRM: Xid (PCI:0000:3b:00): 79, pid=...,
GPU has fallen off the bus." Every event is {"vendor", "pci", "code", "kind", "critical",
"time", "text"}; the list keeps its first name, `xid_events`, for both vendors.
Pure: no I/O, no Django.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from runners.adapters.amdgpu_log import amdgpu_event
from runners.adapters.documents import decode
from runners.adapters.errors import reading

XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]{4,20})\): (\d{1,4}),\s?(.*)$")
# dmesg --time-format iso: 2026-12-01T10:11:12,123456+00:00; journalctl -k -o short-iso:
# 2026-12-01T10:11:12+0000 (a comma before the fraction, colon or not in the offset).
ISO_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[,.](\d{1,9}))?([+-]\d\d:?\d\d|Z)")
# Codes that mean the GPU or its memory failed, not the program on it (NVIDIA's XID catalog,
# docs.nvidia.com/deploy/xid-errors, and DCGM's health watches): 48 double-bit ECC, 63/64 ECC
# page retirement or row remapping, 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC
# rate, 94/95 contained/uncontained ECC, 119/120 GSP firmware. 13, 31, 43 and 45 are what a
# faulting program (possibly the product under test) causes, so they are not host faults.
CRITICAL_XIDS = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def parse_kernel_log(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Every XID or amdgpu fault line, with its PCI address, epoch time (None when the line
    has no ISO timestamp) and whether it is a host fault; other lines are skipped."""
    with reading(source):
        # A quiet kernel log is empty output, which is a fact here, not a broken tool.
        lines = decode(text).splitlines() if text.strip() else []
        events = [event for line in lines if (event := _event(line.strip())) is not None]
        return {"tool": "kernel-log", "xid_events": events}


def _event(line: str) -> dict[str, Any] | None:
    event = _xid_event(line) or amdgpu_event(line)
    return None if event is None else {**event, "time": _epoch(line)}


def _xid_event(line: str) -> dict[str, Any] | None:
    found = XID_LINE.search(line)
    if found is None:
        return None
    pci, code, rest = found.group(1), int(found.group(2)), found.group(3)
    return {
        "vendor": "nvidia",
        "pci": pci.lower(),
        "code": code,
        "kind": "xid",
        "critical": code in CRITICAL_XIDS,
        "text": rest.strip()[:200],
    }


def _epoch(line: str) -> float | None:
    stamp = ISO_STAMP.match(line)
    if stamp is None:
        return None
    whole, fraction, offset = stamp.groups()
    offset = "+00:00" if offset == "Z" else offset
    if ":" not in offset:
        offset = f"{offset[:3]}:{offset[3:]}"
    moment = datetime.fromisoformat(f"{whole}{offset}")
    return moment.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)
