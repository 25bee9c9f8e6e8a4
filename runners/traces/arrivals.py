"""Arrival rate and burstiness in one pass: mean rate, the coefficient of variation of the
gaps between arrivals (1 for Poisson, above 1 for bursty traffic), peaks per 1 s and 10 s
window, and the count per minute for the rate-over-time picture. Pure."""

from __future__ import annotations

import math
from typing import Any

PEAK_WINDOWS_S = (1, 10)
SERIES_WINDOW_S = 60


class ArrivalProfile:
    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.gaps = 0
        self.gap_mean = 0.0
        self.gap_m2 = 0.0  # Welford's running sum of squared deviations
        self.window_counts = {w: [-1, 0] for w in PEAK_WINDOWS_S}  # window -> [index, count]
        self.peaks = dict.fromkeys(PEAK_WINDOWS_S, 0)
        self.per_minute: list[int] = []

    def add(self, arrival: float) -> None:
        if self.first is None:
            self.first = arrival
        elif self.last is not None:
            self._add_gap(arrival - self.last)
        self.last = arrival
        offset = arrival - self.first
        for window, current in self.window_counts.items():
            index = math.floor(offset / window)
            current[:] = [index, current[1] + 1] if index == current[0] else [index, 1]
            self.peaks[window] = max(self.peaks[window], current[1])
        minute = math.floor(offset / SERIES_WINDOW_S)
        self.per_minute.extend([0] * (minute + 1 - len(self.per_minute)))
        self.per_minute[minute] += 1

    def _add_gap(self, gap: float) -> None:
        self.gaps += 1
        delta = gap - self.gap_mean
        self.gap_mean += delta / self.gaps
        self.gap_m2 += delta * (gap - self.gap_mean)

    def to_dict(self) -> dict[str, Any] | None:
        if self.first is None or self.last is None:
            return None
        duration = self.last - self.first
        return {
            "duration_s": duration,
            "mean_rate_per_s": self.gaps / duration if duration > 0 else None,
            "interarrival_cv": self._cv(),
            **{f"peak_per_{w}s": self.peaks[w] for w in PEAK_WINDOWS_S},
            "per_minute": self.per_minute,
        }

    def _cv(self) -> float | None:
        if self.gaps < 2 or self.gap_mean <= 0:
            return None
        return math.sqrt(self.gap_m2 / (self.gaps - 1)) / self.gap_mean
