"""amdgpu's fault lines in the kernel log, the AMD counterpart of NVIDIA's XIDs.

amdgpu logs through dev_err/dev_info, so a line starts with the device, "amdgpu 0000:dd:00.0: ",
then "amdgpu: " (amdgpu.h's dev_fmt) or, for RAS events, "{N}" (the event id that
amdgpu_ras_event_log_print puts first). The message texts are the kernel's
(drivers/gpu/drm/amd): amdgpu_ras.c "%lld new uncorrectable hardware errors detected in %s
block" (older kernels "%ld uncorrectable hardware errors detected in %s block"), "... new
deferred hardware errors ...", "uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT)
detected!"; kfd_int_process_v9.c "poison is consumed by client %d, kick off gpu reset flow";
amdgpu_ras_eeprom.c "Saved bad pages %d reaches threshold value %d"; amdgpu_device.c "GPU reset
begin!", "GPU reset(%d) failed", "ASIC reset failed with error, ..." and the SMU's "Mode2 reset
failed!"; amdgpu_job.c "ring %s timeout, signaled seq=%u, emitted seq=%u"; gmc_v9_0.c and
gmc_v10_0.c "[%s] %s page fault (src_id:%u ring:%u vmid:%u pasid:%u ...)". A real MI300X log in
this layout is described in tests/fixtures/kernel-log/PROVENANCE.md.

Pure: no I/O, no Django.
"""

from __future__ import annotations

import re
from typing import Any

AMDGPU_LINE = re.compile(
    r"\bamdgpu ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): "
    r"(?:amdgpu: )?(?:\{\d{1,20}\})?\s?(.*)$"
)
# kind -> (what it means, the pattern of its message, whether it is a host fault). The first
# group, where there is one, is an error count: "0 new ... errors" is no error. The running
# "... detected in total in %s block" lines are not matched: they repeat an old count whenever
# any block logs a new one, so their time says nothing.
AMDGPU_FAULTS: dict[str, tuple[str, re.Pattern[str], bool]] = {
    "ras_uncorrectable": (
        "uncorrectable ECC error",
        re.compile(r"(\d+) (?:new )?uncorrectable hardware errors detected in \w+ block"),
        True,
    ),
    "ras_deferred": (
        "deferred (poisoned) memory error",
        re.compile(r"(\d+) new (?:deferred hardware errors|poison consumption) detected in"),
        True,
    ),
    "ras_poison": (
        "poison consumed or created",
        re.compile(r"poison is consumed by client|RAS poison consumption|Poison is created"),
        True,
    ),
    "ras_fatal": (
        "fatal RAS error",
        re.compile(r"uncorrectable hardware error ?\(ERREVENT_ATHUB_INTERRUPT\)", re.IGNORECASE),
        True,
    ),
    "bad_pages": (
        "retired-page table full",
        re.compile(r"Saved bad pages \d+ reaches threshold value"),
        True,
    ),
    "reset_failed": (
        "GPU reset failed",
        re.compile(
            r"GPU reset(?:\(\d+\))? failed|mode[12] reset failed|ASIC reset failed", re.IGNORECASE
        ),
        True,
    ),
    # What a faulting program causes (possibly the product under test), as NVIDIA's XIDs 13,
    # 31 and 43 are: a hung job, its ring timeout and the reset that recovers from it, a bad
    # memory access. A reset the hardware asked for comes with one of the RAS lines above.
    "gpu_reset": ("GPU reset", re.compile(r"GPU reset begin"), False),
    "ring_timeout": ("ring timeout", re.compile(r"ring \S+ timeout"), False),
    "page_fault": (
        "GPU page fault",
        re.compile(r"\[(?:gfx|mm)hub\d*\] (?:(?:no-)?retry )?page fault"),
        False,
    ),
}


def amdgpu_event(line: str) -> dict[str, Any] | None:
    """The fault an amdgpu line reports (without its time), or None for any other line."""
    found = AMDGPU_LINE.search(line)
    if found is None:
        return None
    pci, message = found.group(1).lower(), found.group(2).strip()
    for kind, (_, pattern, critical) in AMDGPU_FAULTS.items():
        match = pattern.search(message)
        if match is None:
            continue
        if match.groups() and int(match.group(1)) == 0:
            return None
        return {
            "vendor": "amd",
            "pci": pci,
            "code": None,
            "kind": kind,
            "critical": critical,
            "text": message[:200],
        }
    return None
