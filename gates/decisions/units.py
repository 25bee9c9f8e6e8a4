"""The unit and the kind of comparison of a decided clause or check, so a reader (or a CI
report) never mistakes a % reduction for an x ratio. Pure: plain dicts in, strings out.

`comparison` is one of: reduction, gain (at least N % better), ratio (at least N x), equals,
at_least, at_most, matches, present; None where the row does not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_G3_UNITS = {"reduction": "%", "gain": "%", "ratio": "x", "floor": "%"}
# A goodput floor holds one arm's share of requests within its SLO to at least the bar.
_G3_COMPARISONS = {"floor": "at_least"}
# G1 checks: what they compare and in which unit (gates/decisions/g1.py names them).
_CHECKS: dict[str, tuple[str, str | None]] = {
    "gpu_vendor": ("matches", None),
    "gpu_model": ("matches", None),
    "kernel": ("matches", None),
    "gpu_count": ("equals", "GPUs"),
    "offload_tier": ("present", None),
    "crashes": ("at_most", "crashes"),
    "offload_hit": ("at_least", "hit rate"),
    "offload_hits": ("at_least", "hit rate"),
    # G2 checks (gates/decisions/g2.py CHECK_NUMBERS)
    "health": ("at_most", "s"),
    "equivalence": ("at_most", "%"),
    "noise_floor": ("at_most", "%"),
    "replay_band": ("within_band", None),
}
_THROUGHPUT_UNITS = {
    "output_throughput": "tokens/s",
    "total_token_throughput": "tokens/s",
    "request_throughput": "requests/s",
}
_SUFFIXES = (("_gib", "GiB"), ("_mib", "MiB"), ("_pct", "%"), ("_ms", "ms"), ("_s", "s"))


def clause_unit(row: Mapping[str, Any]) -> str | None:
    """ "%" or "x" for a G3 cell; the unit a check's numbers are in, when it has one."""
    if row.get("change") in _G3_UNITS:
        return _G3_UNITS[row["change"]]
    name = str(row.get("check") or row.get("metric") or "")
    if name in _CHECKS:
        return _CHECKS[name][1]
    if name.endswith("_min") and name != "gpu_memory_min":
        return "version"
    return next((unit for suffix, unit in _SUFFIXES if name.endswith(suffix)), None)


def clause_comparison(row: Mapping[str, Any]) -> str | None:
    change = row.get("change")
    if isinstance(change, str) and change in _G3_UNITS:
        return _G3_COMPARISONS.get(change, change)
    name = str(row.get("check") or row.get("metric") or "")
    if name in _CHECKS:
        return _CHECKS[name][0]
    if "_min" in name:
        return "at_least"
    if name.startswith("max_") or "_max" in name:
        return "at_most"
    return None


def metric_unit(name: str) -> str:
    """The unit one arm's value of a G3 metric is in: "ms" for a latency statistic,
    "tokens/s" or "requests/s" for a throughput; empty for a name it does not know."""
    if name in _THROUGHPUT_UNITS:
        return _THROUGHPUT_UNITS[name]
    family, _, stat = name.partition("_")
    return "ms" if family in ("ttft", "tpot", "itl", "e2el") and stat else ""
