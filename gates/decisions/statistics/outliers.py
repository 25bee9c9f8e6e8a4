"""The pre-declared outlier rule of G3: a repetition whose server or client shows it was
disturbed (a failed-request spike beyond validity.max_failed_pct, or more preemptions than
statistics.outliers.max_preemptions), or whose log-ratio in some cell the robust screen flags
(statistics.outliers.screen_level), is set aside from every cell and re-run, up to
statistics.outliers.max_reruns; it is recorded and shown, never silently dropped. Beyond the
budget a disturbance keeps its validity verdict (the run is invalid).

The screen: in each cell, a repetition whose log-ratio lies further from the cell's median than
a limit, in robust sds, is flagged. The robust sd is 1.4826 x the median absolute deviation,
never under the reference noise (G2's, else the stated CV's), so a real noise above the
reference widens the screen instead of flagging honest repetitions. Under normal noise the
cell's largest distance in MAD units is pivotal (its law does not depend on the noise), so the
limit is its quantile at 1 - level / cells, simulated once per repetition count (seeded, the
conservative end of its Monte Carlo error); the union bound over cells needs no independence
between cells that share an arm. An undisturbed attempt is flagged at most `screen_level` of the
time at any noise (tests measure it); a baseline 1.5x slower in one repetition (7 sds at the
template's noise) is flagged in about nine attempts in ten. At CV 10-20 % such a repetition is
2-3 sds out and not an outlier by any rule the noise allows; the spread and step rules remain.
Pure: plain dicts in and out; imports no Django.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from documents.cell import ValidityCheck

DISTURBANCES = ("failed_pct", "preemptions", "outlier", "step")
MAD_TO_SD = 1.4826  # a normal variable's sd per median absolute deviation
MIN_SCREENED = 4  # fewer repetitions than this give no median worth measuring against


SCREEN_PATHS = 1 << 17  # simulated cells per repetition count


def screen_limit(level: float, cells: int, repetitions: int) -> float:
    """The limit, in robust sds, that an undisturbed cell of `repetitions` normal log-ratios
    exceeds with probability at most `level / cells`."""
    tail = level / max(1, cells)
    return _pivot_quantile(repetitions, round(tail, 12))


@lru_cache(maxsize=256)
def _pivot_quantile(repetitions: int, tail: float) -> float:
    rng = np.random.default_rng(1729 + repetitions)
    draws = rng.standard_normal((SCREEN_PATHS, repetitions))
    median = np.median(draws, axis=1, keepdims=True)
    deviation = np.abs(draws - median)
    scale = MAD_TO_SD * np.median(deviation, axis=1)
    largest = np.sort(deviation.max(axis=1) / np.maximum(scale, 1e-300))
    # The conservative end: the order statistic three binomial sds beyond the nominal one.
    expected = tail * SCREEN_PATHS
    index = SCREEN_PATHS - 1 - max(0, int(expected - 3 * math.sqrt(expected)))
    return float(largest[min(SCREEN_PATHS - 1, max(0, index))])


def robust_scale(log_ratios: np.ndarray, reference: float) -> float:
    median = float(np.median(log_ratios))
    spread = MAD_TO_SD * float(np.median(np.abs(log_ratios - median)))
    return max(spread, reference)


def screen_cell(
    log_ratios: Sequence[float], reference: float, limit: float
) -> list[tuple[int, float]]:
    """(index, distance in robust sds) of each log-ratio beyond `limit` from the median."""
    values = np.asarray(log_ratios, dtype=float)
    if values.size < MIN_SCREENED or reference <= 0:
        return []
    scale = robust_scale(values, reference)
    distance = np.abs(values - np.median(values)) / scale
    return [(int(i), float(distance[i])) for i in np.flatnonzero(distance > limit)]


def screen_checks(
    cells: Sequence[tuple[str, int, Sequence[int], Sequence[float], float | None]], level: float
) -> list[ValidityCheck]:
    """The screen over every cell: (where, tier, repetitions, log-ratios, reference noise) in,
    one failed `outlier` check per flagged (cell, repetition) out."""
    screened = [cell for cell in cells if cell[4] and len(cell[3]) >= MIN_SCREENED]
    found: list[ValidityCheck] = []
    for where, tier, repetitions, logs, reference in screened:
        limit = screen_limit(level, len(screened), len(logs))
        for index, distance in screen_cell(logs, float(reference or 0.0), limit):
            found.append(
                {
                    "check": "outlier",
                    "arm": where,
                    "tier": tier,
                    "repetition": repetitions[index],
                    "observed": distance,
                    "limit": limit,
                    "ok": False,
                    "reason": f"{where} at tier {tier}, repetition {repetitions[index]}: "
                    f"log-ratio {distance:.1f} robust sds from the cell's median (screen limit "
                    f"{limit:.2f} at level {level:g} per attempt)",
                }
            )
    return found


def set_aside_disturbed(checks: list[ValidityCheck], max_reruns: int) -> dict[int, list[str]]:
    """The first `max_reruns` disturbed repetitions and why; their disturbance checks are marked
    `set_aside` so they no longer invalidate the run (other broken checks still do)."""
    disturbed: dict[int, list[str]] = {}
    for check in checks:
        repetition = check["repetition"]
        if repetition is not None and _is_disturbance(check):
            disturbed.setdefault(repetition, []).append(check["reason"])
    chosen = {rep: disturbed[rep] for rep in sorted(disturbed)[:max_reruns]}
    for check in checks:
        if _is_disturbance(check) and check["repetition"] in chosen:
            check["set_aside"] = True
    return chosen


def set_aside_notes(aside: dict[int, list[str]]) -> list[str]:
    return [
        f"repetition {rep} set aside and re-run (the spec's outlier rule): {'; '.join(reasons)}"
        for rep, reasons in aside.items()
    ]


def _is_disturbance(check: ValidityCheck) -> bool:
    return (
        check["ok"] is False
        and check["check"] in DISTURBANCES
        and check.get("repetition") is not None
    )
