"""G4 soak, the pure part: a soak's observed timeline. Stored windows in decide_g4's input shape,
the gaps between windows nobody observed (and why), and how long a spec lets a soak go
unobserved. No I/O, no Django: gates/services/soak/ stores, gates/evidence/soak_recompute.py
re-derives.
"""

from __future__ import annotations

import itertools
from typing import Any

# Two windows further apart than this (beyond the restart of a crashed server, which the agent
# counts inside the crashed window) mean nobody watched the product in between.
GAP_TOLERANCE_S = 1.0


def engine_window(seq: int, start: float, end: float, metrics: dict[str, Any]) -> dict[str, Any]:
    """A stored window in decide_g4's input shape."""
    keys = (
        "crashed",
        "completed",
        "failed",
        "memory_bytes",
        "output_throughput",
        "ttft_p99_ms",
        "external_hit_rate",
    )
    return {"seq": seq, "start": start, "end": end, **{key: metrics.get(key) for key in keys}}


def find_gaps(windows: list[tuple[int, float, float, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Periods between consecutive windows (seq, start, end, metrics) nobody observed, with why:
    the host rebooted (boot id changed) or the agent was down (another agent pid)."""
    gaps = []
    ordered = sorted(windows, key=lambda window: window[0])
    for before, after in itertools.pairwise(ordered):
        if after[1] - before[2] <= GAP_TOLERANCE_S:
            continue
        gaps.append(
            {
                "after_seq": before[0],
                "start": before[2],
                "end": after[1],
                "seconds": round(after[1] - before[2], 3),
                "cause": _gap_cause(before[3], after[3]),
            }
        )
    return gaps


def _gap_cause(before: dict[str, Any], after: dict[str, Any]) -> str:
    if before.get("boot_id") != after.get("boot_id"):
        return "host rebooted (boot id changed)"
    if before.get("agent_pid") != after.get("agent_pid"):
        return "agent down (restarted)"
    return "agent did not record"


def unobserved_allowance_s(spec: dict[str, Any]) -> float:
    """How long the spec lets a soak go unobserved in all."""
    return float(spec["limits"]["max_unobserved_pct"] / 100 * spec["duration_h"] * 3600)
