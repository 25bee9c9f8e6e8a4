"""Bounded-memory distributions for one pass over millions of values: exact counts of small
integers (lengths, distances) and log-bucketed reals (seconds). Pure."""

from __future__ import annotations

import math
from collections import Counter

PERCENTILES = (50, 90, 99)
LOG_BASE = 1.01  # bucket width 1 %: a percentile read from a bucket is within 1 % of the truth
_PER_LOG = 1 / math.log(LOG_BASE)


def count_percentile(counts: Counter[int], q: float) -> int | None:
    """The nearest-rank q-th percentile of integer values given as value -> count."""
    total = sum(counts.values())
    if not total:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    return max(counts)


def count_summary(counts: Counter[int]) -> dict[str, float | int | None]:
    total = sum(counts.values())
    summary: dict[str, float | int | None] = {
        f"p{q}": count_percentile(counts, q) for q in PERCENTILES
    }
    summary["mean"] = sum(v * n for v, n in counts.items()) / total if total else None
    summary["max"] = max(counts) if counts else None
    return summary


def count_cdf(counts: Counter[int], points: list[int]) -> list[list[float]]:
    """[[x, share of values <= x]] at each point."""
    total = sum(counts.values())
    ordered = sorted(counts.items())
    cdf, seen, index = [], 0, 0
    for point in points:
        while index < len(ordered) and ordered[index][0] <= point:
            seen += ordered[index][1]
            index += 1
        cdf.append([point, seen / total if total else 0.0])
    return cdf


class LogHistogram:
    """Positive reals in buckets of width LOG_BASE; zero kept apart."""

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.zeros = 0
        self.total = 0

    def add(self, value: float) -> None:
        self.total += 1
        if value <= 0:
            self.zeros += 1
        else:
            self.buckets[math.floor(math.log(value) * _PER_LOG)] += 1

    def percentile(self, q: float) -> float | None:
        if not self.total:
            return None
        rank = max(1, math.ceil(q / 100 * self.total))
        seen = self.zeros
        if seen >= rank:
            return 0.0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                return float(LOG_BASE ** (bucket + 0.5))  # the bucket's geometric middle
        return None

    def summary(self) -> dict[str, float | int | None]:
        summary: dict[str, float | int | None] = {f"p{q}": self.percentile(q) for q in PERCENTILES}
        summary["count"] = self.total
        return summary

    def cdf(self, points: list[float]) -> list[list[float]]:
        """[[x, share of values <= x]] at each point (to the bucket's resolution)."""
        cdf = []
        for point in points:
            limit = math.floor(math.log(point) * _PER_LOG) if point > 0 else None
            below = sum(n for b, n in self.buckets.items() if limit is not None and b <= limit)
            share = (self.zeros + below) / self.total if self.total else 0.0
            cdf.append([point, share])
        return cdf
