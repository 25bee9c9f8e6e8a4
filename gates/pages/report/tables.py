"""The tables of a gate report, as text a reader can quote: every clause with its comparison, bar,
estimate and interval in the clause's own units, and the G1 inventory. Pure: a decision's stored
clauses and facts in, rows of strings out; no Django, no I/O. A missing or non-numeric value
reads "n/a", never an error (the stored JSON is evidence and is shown as it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gates import figures
from gates.charts.g3 import CHANGE_UNITS
from gates.charts.style import metric_label

GIB = 2**30
NOT_AVAILABLE = "n/a"
NO_INTERVAL = "—"  # a check judged on one observation has no interval
# How each G3 change is judged, in the clause's units (the engine turns every bar into
# "higher is better" so a reduction reads as a positive %).
CHANGE_RULES = {
    "reduction": "reduction in %, at least the bar",
    "gain": "gain in %, at least the bar",
    "ratio": "ratio (x), at least the bar",
    "floor": "share of requests within the SLO in %, at least the bar",
}
# G1: how an observed fact is compared with the spec's expectation, and its unit.
G1_RULES = {
    "gpu_vendor": ("equals", ""),
    "gpu_model": ("every GPU matches the pattern", ""),
    "gpu_count": ("equals", "GPUs"),
    "gpu_memory_min_gib": ("at least, smallest GPU", "GiB"),
    "host_memory_min_gib": ("at least", "GiB"),
    "free_disk_min_gib": ("at least", "GiB"),
    "vllm_min": ("version at least", ""),
    "driver_min": ("version at least", ""),
    "cuda_min": ("version at least", ""),
    "rocm_min": ("version at least", ""),
    "kernel_min": ("version at least", ""),
    "offload_tier": ("present, capacity at least", "GiB"),
}

# G4: each soak check's observed value against its limit (the engine's "at most").
G4_RULES = {
    "crashes": ("at most", "crashes"),
    "error_rate": ("failed requests, at most", "%"),
    "throughput_drift": ("worst drop against the first segment, at most", "%"),
    "ttft_p99_change": ("worst rise against the first segment, at most", "%"),
    "memory_growth": ("growth, at most", "MiB/h"),
    "unobserved": ("time without a window, at most", "%"),
    "offload_hits": ("hit rate, at least", ""),
}


@dataclass(frozen=True)
class ClauseRow:
    """One line of the report's clause table, every number already in its unit."""

    name: str
    comparison: str
    bar: str
    estimate: str
    interval: str
    verdict: str
    cause: str


@dataclass(frozen=True)
class InventoryRow:
    label: str
    value: str


def clause_table(clauses: Any) -> list[ClauseRow]:
    """Rows of a decision's stored clauses: G3 clause x tier cells (and a replayed trace's
    offload cells against the planner's bands, G3's `replay_bands`, `replay_ttft_bands` and
    `replay_ttft_changes`), G1, G2 and G4 checks."""
    rows = []
    for clause in _mappings(clauses):
        if "compare" in clause or "change" in clause:
            rows.append(_g3_row(clause))
        elif clause.get("check") in G2_CHECKS:
            rows.append(G2_CHECKS[clause["check"]](clause))
        elif clause.get("check") in G4_RULES:
            rows.append(_g4_row(clause))
        else:
            rows.append(_g1_row(clause))
    return rows


def inventory_table(facts: Any) -> tuple[list[InventoryRow], list[InventoryRow]]:
    """The host facts G1 observed: (host rows, one row per GPU)."""
    facts = _mapping(facts)
    gpus = _mapping(facts.get("gpu_inventory"))
    tier = _mapping(facts.get("offload_tier"))
    host = [
        InventoryRow("GPU inventory source", _text(gpus.get("source"))),
        InventoryRow("GPU driver", _text(gpus.get("driver_version"))),
        InventoryRow("CUDA", _text(gpus.get("cuda_version"))),
        InventoryRow("ROCm", _text(gpus.get("rocm_version"))),
        InventoryRow("vLLM", _text(facts.get("vllm_version"))),
        InventoryRow("Kernel", _text(facts.get("kernel"))),
        InventoryRow("Host memory", _bytes_gib(facts.get("host_memory_bytes"))),
        InventoryRow("Free disk", _bytes_gib(facts.get("free_disk_bytes"))),
        InventoryRow("Offload tier", _offload_tier(tier)),
    ]
    devices = [
        InventoryRow(
            f"GPU {_text(gpu.get('index'))}",
            f"{_text(gpu.get('name'))}, {_number(_mib_as_gib(gpu.get('memory_total_mib')), 'GiB')}",
        )
        for gpu in _mappings(gpus.get("gpus"))
    ]
    return [row for row in host if row.value != NOT_AVAILABLE], devices


# --- G3 -------------------------------------------------------------------------------------


def _g3_row(cell: Mapping[str, Any]) -> ClauseRow:
    change = str(cell.get("change") or "")
    unit = CHANGE_UNITS.get(change, "")
    compare = str(cell.get("compare") or "")
    arms = " vs ".join(part for part in compare.split("/") if part)
    slo = cell.get("slo")
    within = f" within {slo['text']}" if isinstance(slo, Mapping) and slo.get("text") else ""
    name = f"{metric_label(cell.get('metric'))}{within} {change or 'change'}, {arms or 'arms n/a'}"
    return ClauseRow(
        name=f"{name}, c={_text(cell.get('tier'))}",
        comparison=CHANGE_RULES.get(change, change or NOT_AVAILABLE),
        bar=_number(cell.get("threshold"), unit),
        estimate=_estimate(cell, unit),
        interval=_interval(
            cell.get("low"),
            cell.get("high"),
            unit,
            cell.get("confidence_at_look"),
            estimate=cell.get("estimate"),
        ),
        verdict=_text(cell.get("verdict")),
        cause=_text(cell.get("cause"), empty=""),
    )


def _estimate(cell: Mapping[str, Any], unit: str) -> str:
    """The estimate to the same decimals as its interval (gates.figures.estimate_interval)."""
    if figures.finite(cell.get("estimate")) is None:
        return NOT_AVAILABLE
    return figures.estimate_interval(cell.get("estimate"), cell.get("low"), cell.get("high"), unit)[
        0
    ]


# --- G2 -------------------------------------------------------------------------------------


def _g2_health(check: Mapping[str, Any]) -> ClauseRow:
    return _check_row(
        check,
        "became healthy within the timeout",
        bar=_number(check.get("timeout_s"), "s"),
        estimate=_number(check.get("seconds"), "s"),
    )


def _g2_equivalence(check: Mapping[str, Any]) -> ClauseRow:
    return _check_row(
        check,
        "outputs that differ, at most",
        bar=_number(check.get("max_mismatch_pct"), "%"),
        estimate=_number(check.get("mismatch_pct"), "%"),
    )


def _g2_offload_hit(check: Mapping[str, Any]) -> ClauseRow:
    return _check_row(
        check,
        "offload tier hit rate, at least",
        bar=_number(check.get("min_external_hit_rate"), ""),
        estimate=_number(check.get("external_hit_rate"), ""),
    )


def _g2_noise_floor(check: Mapping[str, Any]) -> ClauseRow:
    low, high = check.get("low_ratio"), check.get("high_ratio")
    return _check_row(
        check,
        f"A/A {metric_label(check.get('metric'))} ratio, interval within the floor",
        bar=f"±{_number(check.get('max_noise_pct'), '%')}",
        estimate=_number(check.get("noise_pct"), "%"),
        interval=_interval(low, high, "x", check.get("confidence")),
    )


def _replay_band(check: Mapping[str, Any]) -> ClauseRow:
    """G2's hit cell or a G3 offload cell (named by its arm and tier) against the band."""
    row = _check_row(
        check,
        "offload tier hit rate within the planner's band (advisory, never the verdict)",
        bar=_fact(check.get("expected"), ""),
        estimate=_fact(check.get("observed"), ""),
    )
    if check.get("arm") is None:
        return row
    return replace(row, name=f"{row.name} {check['arm']}, c={_text(check.get('tier'))}")


def _replay_ttft_band(check: Mapping[str, Any]) -> ClauseRow:
    """A G3 offload cell's measured TTFT p50 against the planner's run of the replay."""
    row = _check_row(
        check,
        "TTFT p50 within the planner's band for the replay (advisory, never the verdict)",
        bar=_fact(check.get("expected"), ""),
        estimate=_fact(check.get("observed"), ""),
    )
    return replace(row, name=f"{row.name} {check.get('arm')}, c={_text(check.get('tier'))}")


def _replay_ttft_change(check: Mapping[str, Any]) -> ClauseRow:
    """A G3 offload cell's measured TTFT change (of the statistic its clause judges) over a
    baseline arm against the planner's paired band for it."""
    row = _check_row(
        check,
        "TTFT change within the planner's band for the replay (advisory, never the verdict)",
        bar=_fact(check.get("expected"), ""),
        estimate=_fact(check.get("observed"), ""),
    )
    # a row stored before the rows named their statistic is TTFT p50's
    metric = check.get("metric") or "ttft_p50"
    cell = f"{check.get('arm')}/{check.get('baseline')} {metric}, c={_text(check.get('tier'))}"
    return replace(row, name=f"{row.name} {cell}")


G2_CHECKS = {
    "health": _g2_health,
    "equivalence": _g2_equivalence,
    "offload_hit": _g2_offload_hit,
    "noise_floor": _g2_noise_floor,
    "replay_band": _replay_band,
    "replay_ttft_band": _replay_ttft_band,
    "replay_ttft_change": _replay_ttft_change,
}


# --- G1 -------------------------------------------------------------------------------------


def _g1_row(check: Mapping[str, Any]) -> ClauseRow:
    comparison, unit = G1_RULES.get(str(check.get("check")), ("as expected", ""))
    return _check_row(
        check,
        comparison,
        bar=_fact(check.get("expected"), unit),
        estimate=_fact(check.get("observed"), unit),
    )


# --- G4 -------------------------------------------------------------------------------------


def _g4_row(check: Mapping[str, Any]) -> ClauseRow:
    comparison, unit = G4_RULES[str(check.get("check"))]
    return _check_row(
        check,
        comparison,
        bar=_fact(check.get("limit"), unit),
        estimate=_fact(check.get("observed"), unit),
    )


def _check_row(
    check: Mapping[str, Any], comparison: str, *, bar: str, estimate: str, interval: str = ""
) -> ClauseRow:
    return ClauseRow(
        name=_text(check.get("check")),
        comparison=comparison,
        bar=bar,
        estimate=estimate,
        interval=interval or NO_INTERVAL,
        verdict=_text(check.get("verdict")),
        cause=_text(check.get("cause"), empty=""),
    )


# --- formatting -----------------------------------------------------------------------------


def _number(value: Any, unit: str) -> str:
    return NOT_AVAILABLE if figures.finite(value) is None else figures.number(value, unit)


def _interval(low: Any, high: Any, unit: str, confidence: Any, estimate: Any = None) -> str:
    if figures.finite(low) is None and figures.finite(high) is None:
        return NOT_AVAILABLE
    level = figures.finite(confidence)
    at = f" at {figures.share(level)}" if level is not None and 0 < level < 1 else ""
    _, shown_low, shown_high = figures.estimate_interval(estimate, low, high, unit)
    return f"[{shown_low}, {shown_high}]{at}"


def _fact(value: Any, unit: str) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {_fact(item, '')}" for key, item in sorted(value.items()))
    if isinstance(value, list):
        distinct = list(dict.fromkeys(_fact(item, unit) for item in value))
        counts = [f"{sum(_fact(item, unit) == d for item in value)} x {d}" for d in distinct]
        return "; ".join(counts) if len(value) > 1 else ", ".join(distinct)
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: NOT_AVAILABLE}[value]
    if isinstance(value, int | float):
        return _number(value, unit)
    return str(value)


def _offload_tier(tier: Mapping[str, Any]) -> str:
    if not tier:
        return NOT_AVAILABLE
    present = "present" if tier.get("present") else "absent"
    capacity = _finite(tier.get("capacity_gib"))
    return f"{present}, {figures.gib(capacity)}" if capacity is not None else present


def _bytes_gib(value: Any) -> str:
    return NOT_AVAILABLE if _finite(value) is None else figures.byte_size(value)


def _mib_as_gib(value: Any) -> float | None:
    number = _finite(value)
    return None if number is None else number / 1024


def _finite(value: Any) -> float | None:
    return figures.finite(value)


def _text(value: Any, *, empty: str = NOT_AVAILABLE) -> str:
    return empty if value is None or value == "" else str(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
