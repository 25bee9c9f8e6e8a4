"""Whether the host stayed fit to measure through a G4 soak. Each window's smi output and new
kernel-log lines are read into its sample (`window_health`); the soak's windows, folded in
order (`health_fold`), end it as infra_error on a critical XID logged since the run started, a
foreign process on a GPU, or uncorrectable ECC errors that rose since the soak's first window.
Throttled clocks, a program's own XID and a probe that could not be read are notes.

The wording and the XID and foreign-process rules are runners.contract's (`host_unfit`).
Pure: no I/O, no Django; runners/soak.py calls it, gates/services/soak.py stores what it says.
"""

from __future__ import annotations

import contextlib
from typing import Any

from runners import adapters
from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem
from runners.adapters.gpu_health import parse_gpu_health_xml
from runners.adapters.gpu_inventory import inventory_source
from runners.contract import host_unfit

SMI_FILE = "smi.txt"
KERNEL_LOG_FILE = "kernel-log.txt"
# GPU health per smi source; a source without a reader (rocm-smi, amd-smi so far) still gives
# the inventory numbers, only no health: that is no fault of the window, so no note either.
HEALTH_READERS = {"nvidia-smi-xml": parse_gpu_health_xml}
# Bounds on what one window and one soak keep (a kernel log in a storm must not bloat rows).
MAX_EVENTS = 20
MAX_PROGRAM_XID_NOTES = 3
MAX_FINDINGS = 40
MAX_FAULTS_NAMED = 3


def window_health(line: dict, files: dict[str, bytes]) -> dict[str, Any]:
    """The window's GPUs (None when smi was not read), its critical XID events (None when the
    kernel log was not read) and its notes."""
    notes: list[str] = []
    errors = line.get("probe_errors") or {}
    gpus = _gpus(files.get(SMI_FILE), errors.get("smi"), _server_pids(line), notes)
    events = _xid_events(files.get(KERNEL_LOG_FILE), errors.get("kernel_log"), notes)
    for gpu in gpus or []:
        # Clocks held down under a sustained load are the host's state, not a fault that
        # voids the window: recorded, shown, and left to the operator (a 72 h soak is not
        # ended on a thermal hour; the throughput clause sees what it cost).
        notes += [f"GPU {gpu['index']}: clocks held down ({r})" for r in gpu["slowdown_reasons"]]
    return {"gpus": gpus, "xid_events": events, "notes": notes}


def _server_pids(line: dict) -> set[int]:
    """The soak's own server and its processes (the agent lists its process tree): on the
    GPUs by design, so never foreign; their memory is expected too."""
    pids = {line.get("server_pid"), *(line.get("server_pids") or [])}
    return {pid for pid in pids if isinstance(pid, int)}


def _gpus(raw: bytes | None, error: str | None, server: set[int], notes: list[str]):
    if error:
        notes.append(f"smi could not be read ({error}): GPU health not checked in this window")
    if not raw:
        if raw is not None and not error:
            notes.append("smi printed nothing: GPU health not checked in this window")
        return None
    try:
        text = decode(raw)
        reader = HEALTH_READERS.get(inventory_source(text) or "")
        if reader is None:
            return None
        return [_gpu(gpu, server) for gpu in reader(text)["gpus"]]
    except (adapters.AdapterError, FormatProblem, KeyError, TypeError, ValueError) as problem:
        notes.append(f"smi output unreadable ({problem}): GPU health not checked in this window")
        return None


def _gpu(gpu: dict, server: set[int]) -> dict[str, Any]:
    foreign = [p for p in gpu.get("compute_processes") or [] if _pid(p.get("pid")) not in server]
    return {
        "index": gpu["index"],
        "pci_bus_id": gpu.get("pci_bus_id"),
        "ecc_uncorrectable": gpu.get("ecc_uncorrectable"),
        "slowdown_reasons": list(gpu.get("slowdown_reasons") or []),
        "foreign_processes": foreign,
    }


def _pid(value: object) -> int | None:
    with contextlib.suppress(TypeError, ValueError):
        return int(str(value))
    return None


def _xid_events(raw: bytes | None, error: str | None, notes: list[str]) -> list[dict] | None:
    if error:
        notes.append(f"kernel log could not be read ({error}): XIDs not checked in this window")
    if raw is None:
        return None
    try:
        events = adapters.parse(raw, tool="kernel-log", source=KERNEL_LOG_FILE)["xid_events"]
    except adapters.AdapterError as problem:
        notes.append(f"kernel log unreadable ({problem}): XIDs not checked in this window")
        return None
    program = [event for event in events if not event.get("critical")]
    notes += [
        f"XID {event['code']} at PCI {event['pci']} in the kernel log (what a faulting program "
        f"causes, the server's possibly; not a host fault): {event['text'][:120]}"
        for event in program[-MAX_PROGRAM_XID_NOTES:]
    ]
    # The newest: an old window's whole-log capture may hold far older ones.
    return [event for event in events if event.get("critical")][-MAX_EVENTS:]


def health_fold(summary: dict, seq: int, health: dict | None) -> tuple[dict, list[str]]:
    """The soak's health so far with window `seq` added (windows in seq order, each once), and
    why that window shows the host unfit to measure (empty when fit).

    `summary["since"]` is the run's start: an XID logged before it was the contract step's to
    refuse, one logged after it (server start-up included) is this soak's."""
    summary = {"ecc_baseline": {}, "findings": [], "windows": 0, **summary}
    if health is None:  # a window stored before the soak watched the host's health
        return summary, []
    summary["windows"] += 1
    summary["findings"] = _findings(summary["findings"], seq, health.get("notes") or [])
    gpus = health.get("gpus") or []
    view = {"gpus": [_as_health(gpu) for gpu in gpus]}
    faults = host_unfit(
        view,
        held_max_mib=None,
        xid_events=health.get("xid_events") or [],
        since=summary.get("since"),
    )
    baseline = dict(summary["ecc_baseline"])
    for gpu in gpus:
        faults += _ecc_rise(gpu, baseline, seq)
    summary["ecc_baseline"] = baseline
    return summary, faults


def _as_health(gpu: dict) -> dict:
    """The window's GPU as host_unfit reads it, with only what a running soak is held to:
    someone else's process. No held-memory check (the server holds it), no throttling (a
    note), no absolute ECC count (a rise is the rule here)."""
    return {
        "index": gpu["index"],
        "pci_bus_id": gpu.get("pci_bus_id"),
        "compute_processes": gpu.get("foreign_processes") or [],
    }


def _ecc_rise(gpu: dict, baseline: dict, seq: int) -> list[str]:
    """Uncorrectable ECC errors counted since the soak's first window that read this GPU's
    count. The first window is the baseline (the contract step before the soak already
    refused a host with any); a reboot resets the volatile count, so a fall is no finding."""
    count, key = gpu.get("ecc_uncorrectable"), gpu.get("pci_bus_id") or f"#{gpu['index']}"
    if not isinstance(count, int):
        return []
    first = baseline.setdefault(key, {"count": count, "seq": seq})
    if count <= first["count"]:
        return []
    return [
        f"GPU {gpu['index']}: uncorrectable ECC errors rose from {first['count']} "
        f"(window {first['seq']}) to {count}"
    ]


def _findings(findings: list[dict], seq: int, notes: list[str]) -> list[dict]:
    """Each distinct note with its first and last window and how many windows showed it."""
    found = [dict(entry) for entry in findings]
    for note in dict.fromkeys(notes):
        entry = next((entry for entry in found if entry["note"] == note), None)
        if entry is not None:
            entry.update(last_seq=seq, windows=entry["windows"] + 1)
        elif len(found) < MAX_FINDINGS:
            found.append({"note": note, "first_seq": seq, "last_seq": seq, "windows": 1})
    return found


def fault_reason(seq: int, faults: list[str]) -> str:
    """The run's reason: the window, then each GPU and code (the first few)."""
    named = "; ".join(faults[:MAX_FAULTS_NAMED])
    more = len(faults) - MAX_FAULTS_NAMED
    if more > 0:
        named += f"; and {more} more"
    return f"the host became unfit to measure in window {seq}: {named}"
