"""Recomputing a G4 soak decision from a bundle: every stored window's metrics re-derived from
its line and raw files with the collector's own functions (runners.soak.collector window_sample,
engine_window, find_gaps), then decide_g4 on them, compared number by number with the record.

What comes from where (docs/evidence.md):
- a window's metrics: from `files/soak/wNNNNNN/` (bench.json, /metrics scrapes, smi output) and
  its line `window-line.json` as the agent wrote it; a window collected before lines were kept
  has its line's own fields (crash, pids, boot id, RSS, free space) taken from the stored sample;
- a raw file the collector refused (damaged in transit) was never kept: its note is as recorded;
- the gaps between windows and the span's end: recomputed from the windows (and the agent's
  exit time, as recorded); the soak's start, its extensions, the agent's exit and the operator's
  notes are the collector's records of the agent, taken as recorded;
- the host's health over the soak: folded again from the windows' smi output and kernel logs
  (runners.soak.fitness), from the run's start as recorded; a window that shows the host unfit
  to measure means the run should have ended infra_error, never with this decision.

Pure: plain data and bytes in, a list of problems out. Imports no Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

from gates.decisions import EvidenceError, decide_gate
from gates.evidence.recompute import decision_differences, differences
from gates.specs.validation import parse_spec
from runners.soak import collector, fitness, timeline

# The stored sample's fields that come from the window's line itself, not from a raw file.
LINE_FIELDS = (
    "boot_id",
    "agent_pid",
    "server_pid",
    "server_pids",
    "probe_errors",
    "host_available_bytes",
    "free_disk_bytes",
)
# The collector's records of the agent (not of the product), kept as recorded.
AS_RECORDED = ("extended_h", "notes", "stop_reason", "agent_generations", "agent_exit")
NO_RESULT = re.compile(r"the bench left no result \(exit (-?\d+|None)\)")


def recompute_soak(
    spec: dict,
    decision: dict,
    stored: list[dict],
    files: dict[str, bytes],
    where: str,
    dropped: Collection[int] = (),
) -> list[str]:
    """Every way the recorded soak decision differs from one recomputed from the windows; a
    window in `dropped` (its raw files dropped by retention) counts with its metrics as
    recorded, its line still checked against its stored times."""
    recorded = decision.get("result") or {}
    soak = recorded.get("soak") or {}
    problems: list[str] = []
    chain = []
    health = _health_start(soak)
    for position, row in enumerate(sorted(stored, key=lambda row: row["seq"])):
        label = f"{where}[{position}] (window {row['seq']})"
        if row["seq"] in dropped:
            sample, found = recorded_window(row, files, label)
        else:
            sample, found = rederive_window(row, files, label)
        problems += found
        problems += differences(row.get("metrics"), sample, f"{label}.metrics")
        chain.append((row["seq"], row["start"], row["end"], sample))
        if health is not None:
            health, faults = fitness.health_fold(health, row["seq"], sample.get("health"))
            problems += _unfit(label, row["seq"], faults)
    windows = [timeline.engine_window(*window) for window in chain]
    in_force = {**spec, "duration_h": spec["duration_h"] + (soak.get("extended_h") or 0)}
    try:
        result = decide_gate(
            parse_spec(in_force, "G4"), windows, soak_context(recorded, soak, windows)
        )
    except (EvidenceError, KeyError, ValueError, TypeError) as error:
        return [*problems, f"decision: cannot be recomputed from the soak windows ({error})"]
    result["soak"] = {
        **{key: soak.get(key) for key in AS_RECORDED if key in soak},
        "compressed": spec["duration_h"] < 1,
        "gaps": timeline.find_gaps(chain),
    }
    if health is not None:
        result["soak"]["health"] = health
    return problems + decision_differences(decision, recorded, result)


def _health_start(soak: dict) -> dict | None:
    """Where the fold of the host's health starts; None for a decision recorded before the
    soak watched it (nothing to compare)."""
    if "health" not in soak:
        return None
    recorded = soak["health"] or {}
    return {"since": recorded["since"]} if "since" in recorded else {}


def _unfit(label: str, seq: int, faults: list[str]) -> list[str]:
    if not faults:
        return []
    return [
        f"{label}: {fitness.fault_reason(seq, faults)}; the run should have ended "
        "infra_error, not with a decision"
    ]


def rederive_window(row: dict, files: dict[str, bytes], label: str) -> tuple[dict, list[str]]:
    """The window's sample from its kept files, as the collector derived it when it stored it."""
    folder = collector.window_folder(row["seq"])
    kept = {n.removeprefix(folder): data for n, data in files.items() if n.startswith(folder)}
    metrics = row.get("metrics") or {}
    problems: list[str] = []
    text = kept.pop(collector.LINE_FILE, None)
    if text is None:
        line = line_from_sample(row)
    else:
        line = json.loads(text)
        for key in ("seq", "start", "end"):
            problems += differences(row.get(key), line.get(key), f"{label}.{key}")
    refused = [note for note in metrics.get("notes") or [] if note.endswith(collector.NOT_KEPT)]
    window = collector.Window(line, files=kept, problems=refused)
    # A window stored before the soak watched the host's health is re-derived as it was.
    return collector.window_sample(window, watch_health="health" in metrics), problems


def recorded_window(row: dict, files: dict[str, bytes], label: str) -> tuple[dict, list[str]]:
    """A window whose raw files retention dropped: its metrics as recorded (the sealed statement
    signs them), its kept line still checked against the stored seq and times."""
    text = files.get(collector.window_folder(row["seq"]) + collector.LINE_FILE)
    problems: list[str] = []
    if text is not None:
        line = json.loads(text)
        for key in ("seq", "start", "end"):
            problems += differences(row.get(key), line.get(key), f"{label}.{key}")
    return dict(row.get("metrics") or {}), problems


def line_from_sample(row: dict) -> dict:
    """A window collected before its line was kept: the line's own fields from the stored sample
    (what the raw files give is still re-derived from them)."""
    metrics = row.get("metrics") or {}
    line = {key: metrics.get(key) for key in LINE_FIELDS}
    line.update(
        seq=row["seq"],
        start=row["start"],
        end=row["end"],
        crashed=metrics.get("crashed"),
        server_rss_bytes=metrics.get("server_rss_bytes"),
    )
    if metrics.get("crash"):
        line["crash"] = metrics["crash"]
    for note in metrics.get("notes") or []:
        found = NO_RESULT.fullmatch(note)
        if found:
            line["bench_exit"] = None if found[1] == "None" else int(found[1])
    return line


def soak_context(recorded: dict, soak: dict, windows: list[dict]) -> dict:
    """The span decide_g4 was given: the agent's start as recorded (its state, not a window),
    the end from the last window, or the agent's exit when it watched longer; and the
    summary's block and memory stride as recorded."""
    inputs = recorded.get("inputs") or {}
    started = (inputs.get("span") or {}).get("started_at")
    ended = windows[-1]["end"] if windows else started
    exit_at = (soak.get("agent_exit") or {}).get("at")
    if exit_at is not None and ended is not None:
        ended = max(ended, exit_at)
    context = {"started_at": started, "ended_at": ended}
    # How the collector summarised the windows (fixed when the soak began, so an extension
    # does not change it); absent from decisions recorded before summaries: from the spec.
    limits = inputs.get("limits") or {}
    for key, name in (("block", "block_windows"), ("memory_stride", "memory_stride")):
        if name in limits:
            context[key] = limits[name]
    return context
