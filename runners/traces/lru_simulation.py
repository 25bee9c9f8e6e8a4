"""The naive reference: one LRU cache simulated per capacity, with the same prefix rule and
the same order as prefix_hits.py (look every block of a request up, then touch them tail
first). The tests hold the one-pass curve to it; bench/ measures what one pass saves. Pure."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from runners.traces.prefix_hits import BlockKeys
from runners.traces.records import TraceRecord, block_weights


def simulated_hit_ratio(
    records: Iterable[TraceRecord],
    capacity_tokens: int,
    block_tokens: int,
    chained_ids: bool = True,
    warmup_requests: int = 0,
) -> float:
    capacity = capacity_tokens // block_tokens
    cache: OrderedDict[int, None] = OrderedDict()  # least recently used first
    keys_of = BlockKeys(chained_ids)
    hit_tokens = total_tokens = 0
    for index, record in enumerate(records):
        keys = keys_of.of(record.block_ids or ())
        weights = block_weights(record.input_tokens, len(keys), block_tokens)
        if index >= warmup_requests:
            total_tokens += record.input_tokens
            for key, weight in zip(keys, weights, strict=True):
                if key not in cache:
                    break
                hit_tokens += weight
        for key in reversed(keys):
            cache[key] = None
            cache.move_to_end(key)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hit_tokens / total_tokens if total_tokens else 0.0
