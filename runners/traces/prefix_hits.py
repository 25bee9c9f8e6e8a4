"""What a prefix cache would hit on a trace, at every capacity at once. Pure.

Blocks are keyed by their chain (a block stands for itself and every block before it). Per
request, every block is looked up first (its LRU stack distance d_j), then the request's blocks
are touched tail first, so that its head ends most recent: prefix caches evict leaves first
(workloads.md §3.2). Block j hits at capacity C blocks only if blocks 0..j all do, i.e. when
e_j = max(d_0..d_j) < C; its tokens go to a histogram keyed by e_j, which gives the
token-weighted LRU hit ratio F(C) for every C from one pass (Mattson).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from runners.traces.histograms import LogHistogram, count_cdf, count_summary
from runners.traces.lru_stack import LruStack
from runners.traces.records import TraceRecord, block_weights

CURVE_STEPS_PER_DOUBLING = 4
SECONDS_CDF_POINTS = [10.0**e * m for e in range(-3, 7) for m in (1, 2, 5)]


class BlockKeys:
    """Cache keys for a request's block ids: the ids themselves when the trace already chains
    them (Mooncake), else a small int per (parent key, id) (Bailian does not say it chains)."""

    def __init__(self, chained_ids: bool) -> None:
        self.chained_ids = chained_ids
        self._chain: dict[tuple[int, int], int] = {}

    def of(self, block_ids: Sequence[int]) -> list[int]:
        if self.chained_ids:
            return list(block_ids)
        keys, parent, chain = [], -1, self._chain
        for block_id in block_ids:
            parent = chain.setdefault((parent, block_id), len(chain))
            keys.append(parent)
        return keys


class PrefixHits:
    """Feed records in arrival order; requests before `warmup_requests` fill the cache but are
    not measured (KVCache.AI measures the last 50 %, so the cache has filled first)."""

    def __init__(self, block_tokens: int, chained_ids: bool, warmup_requests: int = 0) -> None:
        self.block_tokens = block_tokens
        self.warmup_requests = warmup_requests
        self.keys = BlockKeys(chained_ids)
        self.stack = LruStack()
        self.requests = 0
        self.measured_tokens = 0
        self.hit_tokens_by_depth: Counter[int] = Counter()  # e_j -> tokens
        self.reuse_blocks: Counter[int] = Counter()  # d_j of every re-referenced block
        self.reuse_seconds = LogHistogram()
        self.last_seen_s: dict[int, float] = {}  # key -> arrival of its last request

    def add(self, record: TraceRecord) -> None:
        keys = self.keys.of(record.block_ids or ())
        measured = self.requests >= self.warmup_requests
        self.requests += 1
        distances = self.stack.look_up_then_touch(keys)
        weights = block_weights(record.input_tokens, len(keys), self.block_tokens)
        depth = 0
        for distance, weight in zip(distances, weights, strict=True):
            if distance is None:
                break  # no later block of this request can hit
            depth = max(depth, distance)
            if measured:
                self.hit_tokens_by_depth[depth] += weight
        if measured:
            self.measured_tokens += record.input_tokens
        self._add_reuse(keys, distances, record.arrival_s)

    def _add_reuse(self, keys: list[int], distances: list[int | None], at: float | None) -> None:
        for key, distance in zip(keys, distances, strict=True):
            if distance is not None:
                self.reuse_blocks[distance] += 1
                if at is not None:
                    self.reuse_seconds.add(at - self.last_seen_s[key])
        if at is not None:
            self.last_seen_s.update(dict.fromkeys(keys, at))

    def curve(self) -> HitCurve:
        return HitCurve(self.hit_tokens_by_depth, self.measured_tokens, self.block_tokens)

    def reuse_to_dict(self) -> dict[str, Any]:
        blocks = count_summary(self.reuse_blocks) | {"count": sum(self.reuse_blocks.values())}
        top = max(self.reuse_blocks, default=0)
        points = [2**k for k in range(top.bit_length() + 1)]
        seconds = self.reuse_seconds.summary() if self.reuse_seconds.total else None
        return {
            "blocks": blocks | {"cdf": count_cdf(self.reuse_blocks, points)},
            "seconds": seconds and seconds | {"cdf": self.reuse_seconds.cdf(SECONDS_CDF_POINTS)},
        }


class HitCurve:
    """F(C): the share of measured input tokens an LRU cache of C tokens hits."""

    def __init__(self, tokens_by_depth: Counter[int], total_tokens: int, block_tokens: int) -> None:
        self.depths = sorted(tokens_by_depth)
        self.cumulative = list(itertools.accumulate(tokens_by_depth[d] for d in self.depths))
        self.total_tokens = total_tokens
        self.block_tokens = block_tokens

    def at(self, capacity_tokens: int) -> float:
        """Hit ratio with room for capacity_tokens // block_tokens whole blocks."""
        index = bisect.bisect_left(self.depths, capacity_tokens // self.block_tokens)
        hits = self.cumulative[index - 1] if index else 0
        return hits / self.total_tokens if self.total_tokens else 0.0

    def ceiling(self) -> float:
        """The infinite cache: every block seen before hits (its whole prefix was seen too)."""
        hits = self.cumulative[-1] if self.cumulative else 0
        return hits / self.total_tokens if self.total_tokens else 0.0

    def points(self) -> list[list[float]]:
        """[[capacity tokens, hit ratio]] on a log grid up to where the ceiling is reached."""
        full = (self.depths[-1] + 1) if self.depths else 1
        steps = CURVE_STEPS_PER_DOUBLING * max(1, full.bit_length())
        blocks = sorted({max(1, round(2 ** (k / CURVE_STEPS_PER_DOUBLING))) for k in range(steps)})
        blocks = [b for b in blocks if b < full] + [full]
        return [[b * self.block_tokens, self.at(b * self.block_tokens)] for b in blocks]
