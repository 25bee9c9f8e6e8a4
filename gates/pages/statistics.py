"""The G3 gate page's statistics panel: what the spec can decide before it is signed (the
operating characteristic) and how the latest decision reads cell by cell (the look, the
interval on the ratio scale, each repetition's ratio). Reads through gates.selectors; no HTTP.
"""

from __future__ import annotations

from gates.models import Gate
from gates.selectors import gate_cell_readouts, gate_operating_characteristic

_UNITS = {"reduction": " %", "gain": " %", "ratio": "x"}


def g3_statistics(gate: Gate) -> dict | None:
    """The panel's rows, numbers already worded; None for other gate kinds."""
    if gate.kind != Gate.Kind.G3:
        return None
    found = gate_operating_characteristic(gate)
    return {
        "operating": _operating(found) if found and found["available"] else None,
        "unavailable": None if not found or found["available"] else found["reason"],
        "cells": [_cell(cell) for cell in gate_cell_readouts(gate)],
    }


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _outcome(row: dict) -> dict:
    return {
        "pass": _share(row["pass"]),
        "fail": _share(row["fail"]),
        "inconclusive": _share(row["inconclusive"]),
        "repetitions": f"{row['repetitions']:.1f}",
    }


def _with_error(row: dict) -> dict:
    """A gate row with its simulation's own 95 % sampling error on pass and fail."""
    shown = _outcome(row)
    half = row.get("half_width_95") or {}
    for side in ("pass", "fail"):
        if side in half:
            shown[side] = f"{row[side]:.1%} ± {half[side]:.1%}"
    return shown


def _lifetime(row: dict) -> dict:
    half = row["half_width_95"]
    return {
        "scenario": row["scenario"],
        "policy": row["policy_text"],
        "pass": f"{row['pass']:.1%} ± {half['pass']:.1%}",
        "fail": f"{row['fail']:.1%} ± {half['fail']:.1%}",
        "attempts": f"{row['attempts']:.2f}",
        "declared": f"{row['declared']:.1%}",
    }


def _operating(found: dict) -> dict:
    gate = found["gate"]
    hours = gate["at_claims"].get("host_hours")
    return {
        "noise": f"sd of a repetition's log-ratio {found['noise']['sd_log_ratio']:.3f} "
        f"({found['noise']['source']})",
        "plan": f"looks after {', '.join(map(str, found['plan']['looks']))} repetitions; "
        f"error budget split over {found['plan']['attempts']} attempt(s); "
        f"{found['plan']['cells']} cells; {found['simulated_gates']} simulated gates per row",
        "warnings": found["warnings"],
        "at_claims": {**_with_error(gate["at_claims"]), "host_hours": hours},
        "at_bars": _with_error(gate["at_bars"]),
        "lifetime": [_lifetime(row) for row in gate.get("lifetime") or []],
        "clauses": [_clause(clause) for clause in found["clauses"]],
    }


def _clause(clause: dict) -> dict:
    unit = _UNITS[clause["change"]]
    return {
        "title": f"{clause['metric']} {clause['compare']} {clause['change']} "
        f">= {clause['threshold']:g}{unit} at tiers {', '.join(map(str, clause['tiers']))}",
        "claimed": "not stated" if clause["claimed"] is None else f"{clause['claimed']:g}{unit}",
        "power": _share(clause["power_at_claim"]) or "n/a",
        "rows": [
            {"true": f"{row['true']:.3g}{unit}", "claimed": row["claimed"], **_outcome(row)}
            for row in clause["rows"]
        ],
    }


def _cell(cell: dict) -> dict:
    shown = cell.get("shown") or {}
    ratios = ", ".join(
        f"r{rep['repetition']} " + ("unbounded" if rep["ratio"] is None else f"{rep['ratio']:.3g}x")
        for rep in cell["repetitions"]
    )
    return {
        "title": f"{cell['metric']} {cell['compare']} {cell['change']} at tier {cell['tier']}",
        "verdict": cell["verdict"],
        "look": shown.get("look", ""),
        "estimate": shown.get("estimate") or "",
        "interval": shown.get("interval") or "no interval yet",
        "repetitions": ratios,
    }
