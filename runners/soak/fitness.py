"""Whether the host stayed fit to measure through a G4 soak. Each window's GPU health (nvidia-smi's
XML, or on an AMD host amd-smi's metric and process views) and new kernel-log lines are read
into its sample (`window_health`); the soak's windows, folded in order (`health_fold`), end it
as infra_error on a critical XID or amdgpu fault logged since the run started, a foreign
process on a GPU, or uncorrectable ECC errors that rose since the soak's first window.
Throttled clocks, a program's own XID or amdgpu fault and a probe that could not be read are
notes.

The wording and the XID and foreign-process rules are runners.contract's (`host_unfit`).
Pure: no I/O, no Django; runners/soak/collector.py calls it, gates/services/soak/ticks.py stores
what it says.
"""

from __future__ import annotations

import contextlib
from typing import Any

from runners import adapters
from runners.adapters.amd_health import (
    AMD_METRIC,
    AMD_PROCESS,
    inventory_bus_ids,
    parse_amd_health,
    parse_amd_processes,
)
from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, one_line
from runners.adapters.gpu_health import parse_gpu_health_xml
from runners.adapters.gpu_inventory import inventory_source
from runners.contract import fault_name, host_unfit

SMI_FILE = "smi.txt"
KERNEL_LOG_FILE = "kernel-log.txt"
# GPU health per smi source. amd-smi static and rocm-smi carry none (no ECC, processes or
# violations), so on an AMD host the agent also runs the amd_metric and amd_process probes:
# the window files they land in, and the tool each is kept as
# (runners.soak.collector.window_artifacts).
HEALTH_READERS = {"nvidia-smi-xml": parse_gpu_health_xml}
AMD_FILES = {AMD_METRIC: "amd-metric.txt", AMD_PROCESS: "amd-process.txt"}
AMD_TOOLS = {AMD_METRIC: "amd-smi-metric", AMD_PROCESS: "amd-smi-process"}
AMD_LABELS = {AMD_METRIC: "amd-smi metric", AMD_PROCESS: "amd-smi process"}
NOT_CHECKED = {
    AMD_METRIC: "GPU health not checked in this window",
    AMD_PROCESS: "foreign processes not checked in this window",
}
# Bounds on what one window and one soak keep (a kernel log in a storm must not bloat rows).
MAX_EVENTS = 20
MAX_PROGRAM_XID_NOTES = 3
MAX_FINDINGS = 40
MAX_FAULTS_NAMED = 3


def window_health(line: dict[str, Any], files: dict[str, bytes]) -> dict[str, Any]:
    """The window's GPUs (None when smi was not read), its critical XID events (None when the
    kernel log was not read) and its notes."""
    notes: list[str] = []
    errors = line.get("probe_errors") or {}
    amd = _amd_watched(files, errors)
    # On an AMD host smi.txt is the inventory only: without it amd-smi still reads the health.
    lost = "GPUs not matched to PCI addresses" if amd else "GPU health not checked"
    gpus = _gpus(files.get(SMI_FILE), errors.get("smi"), notes, f"{lost} in this window")
    if gpus is None and amd:
        gpus = _amd_gpus(files, errors, notes)
    server = _server_pids(line)
    gpus = None if gpus is None else [_gpu(gpu, server) for gpu in gpus]
    events = _xid_events(files.get(KERNEL_LOG_FILE), errors.get("kernel_log"), notes)
    for gpu in gpus or []:
        # Clocks held down under a sustained load are the host's state, not a fault that
        # voids the window: recorded, shown, and left to the operator (a 72 h soak is not
        # ended on a thermal hour; the throughput clause sees what it cost).
        notes += [f"GPU {gpu['index']}: clocks held down ({r})" for r in gpu["slowdown_reasons"]]
    return {"gpus": gpus, "xid_events": events, "notes": notes}


def _server_pids(line: dict[str, Any]) -> set[int]:
    """The soak's own server and its processes (the agent lists its process tree): on the
    GPUs by design, so never foreign; their memory is expected too."""
    pids = {line.get("server_pid"), *(line.get("server_pids") or [])}
    return {pid for pid in pids if isinstance(pid, int)}


def _gpus(
    raw: bytes | None, error: str | None, notes: list[str], lost: str
) -> list[dict[str, Any]] | None:
    if error:
        notes.append(f"smi could not be read ({error}): {lost}")
    if not raw:
        if raw is not None and not error:
            notes.append(f"smi printed nothing: {lost}")
        return None
    try:
        text = decode(raw)
        reader = HEALTH_READERS.get(inventory_source(text) or "")
        if reader is None:
            return None
        gpus: list[dict[str, Any]] = reader(text)["gpus"]
        return gpus
    except (adapters.AdapterError, FormatProblem, KeyError, TypeError, ValueError) as problem:
        notes.append(f"smi output unreadable ({problem}): {lost}")
        return None


def _amd_watched(files: dict[str, bytes], errors: dict[str, Any]) -> bool:
    """The agent ran the amd-smi probes: it does so only on a host whose GPU probe was AMD's."""
    return any(name in errors or AMD_FILES[name] in files for name in AMD_FILES)


def _amd_gpus(
    files: dict[str, bytes], errors: dict[str, Any], notes: list[str]
) -> list[dict[str, Any]] | None:
    """The GPUs as amd-smi's metric and process views show them, named by the PCI addresses
    of the window's inventory (smi.txt: amd-smi static or rocm-smi), as the contract step
    names them. Without readable processes the rest still counts, with a note."""
    metric = _amd_output(files, errors, AMD_METRIC, notes)
    if metric is None:
        return None
    processes = _readable_processes(_amd_output(files, errors, AMD_PROCESS, notes), notes)
    try:
        health = parse_amd_health(metric, processes, bus_ids=_bus_ids(files.get(SMI_FILE)))
        gpus: list[dict[str, Any]] = health["gpus"]
        return gpus
    except (FormatProblem, KeyError, TypeError, ValueError) as problem:
        notes.append(f"{_said(problem)}: {NOT_CHECKED[AMD_METRIC]}")
        return None


def _amd_output(
    files: dict[str, bytes], errors: dict[str, Any], name: str, notes: list[str]
) -> str | None:
    """One amd-smi probe's output as text, or None with a note saying why there is none."""
    raw, error, label = files.get(AMD_FILES[name]), errors.get(name), AMD_LABELS[name]
    if error:
        notes.append(f"{label} could not be read ({error}): {NOT_CHECKED[name]}")
        return None
    if not raw:
        notes.append(f"{label} gave nothing: {NOT_CHECKED[name]}")
        return None
    try:
        return decode(raw)
    except (FormatProblem, ValueError) as problem:
        notes.append(f"{label} output: {_said(problem)}: {NOT_CHECKED[name]}")
        return None


def _readable_processes(text: str | None, notes: list[str]) -> str | None:
    """The process view when it reads (checked apart: its fault must not void the metric's)."""
    if text is None:
        return None
    try:
        parse_amd_processes(text)
    except (FormatProblem, KeyError, TypeError, ValueError) as problem:
        notes.append(f"amd-smi process output: {_said(problem)}: {NOT_CHECKED[AMD_PROCESS]}")
        return None
    return text


def _bus_ids(raw: bytes | None) -> dict[int, str | None]:
    if not raw:
        return {}
    try:
        return inventory_bus_ids(adapters.parse(raw, tool="gpu-inventory"))
    except adapters.AdapterError:
        return {}  # the kernel log's faults then name the GPU by its PCI address instead


def _said(problem: Exception) -> str:
    return one_line(str(problem), 200)


def _gpu(gpu: dict[str, Any], server: set[int]) -> dict[str, Any]:
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


def _xid_events(
    raw: bytes | None, error: str | None, notes: list[str]
) -> list[dict[str, Any]] | None:
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
        f"{fault_name(event)} at PCI {event['pci']} in the kernel log (what a faulting program "
        f"causes, the server's possibly; not a host fault): {event['text'][:120]}"
        for event in program[-MAX_PROGRAM_XID_NOTES:]
    ]
    # The newest: an old window's whole-log capture may hold far older ones.
    return [event for event in events if event.get("critical")][-MAX_EVENTS:]


def health_fold(
    summary: dict[str, Any], seq: int, health: dict[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
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


def _as_health(gpu: dict[str, Any]) -> dict[str, Any]:
    """The window's GPU as host_unfit reads it, with only what a running soak is held to:
    someone else's process. No held-memory check (the server holds it), no throttling (a
    note), no absolute ECC count (a rise is the rule here)."""
    return {
        "index": gpu["index"],
        "pci_bus_id": gpu.get("pci_bus_id"),
        "compute_processes": gpu.get("foreign_processes") or [],
    }


def _ecc_rise(gpu: dict[str, Any], baseline: dict[str, Any], seq: int) -> list[str]:
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


def _findings(findings: list[dict[str, Any]], seq: int, notes: list[str]) -> list[dict[str, Any]]:
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
