"""One pass over a trace's records: lengths, arrivals, sessions, reuse distances, the
infinite-cache ceiling and the LRU hit-ratio curve (prefix_hits.py). Pure: records in, a
TraceProfile out; memory grows with distinct blocks and sessions, not with requests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from runners.traces.arrivals import ArrivalProfile
from runners.traces.histograms import count_summary
from runners.traces.prefix_hits import PrefixHits
from runners.traces.records import LOAD_SHAPE_ONLY, TraceRecord
from runners.traces.sessions import SessionProfile

DEFAULT_CAPACITIES_TOKENS = (100_000, 300_000, 1_000_000, 3_000_000, 10_000_000, 30_000_000)
DEFINITION = (
    "token-weighted over the measured requests (from measured_from_request on); a block hits "
    "only if every earlier block of its request hits; LRU over chained block keys, each "
    "request's blocks looked up first, then touched tail first; capacity in whole blocks"
)


@dataclass(frozen=True)
class TraceProfile:
    requests: int
    block_accesses: int
    distinct_blocks: int
    input_tokens: int
    output_tokens: int
    block_tokens: int | None
    measured_from_request: int
    input_length: dict[str, Any]
    output_length: dict[str, Any]
    arrivals: dict[str, Any] | None
    sessions: dict[str, Any] | None
    infinite_cache_hit_ratio: float | None = None
    hit_ratio_at: dict[int, float] = field(default_factory=dict)
    hit_ratio_curve: list[list[float]] = field(default_factory=list)
    reuse_distance: dict[str, Any] | None = None

    @property
    def prefix_information(self) -> bool:
        return self.infinite_cache_hit_ratio is not None

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["hit_ratio_at"] = {str(c): r for c, r in self.hit_ratio_at.items()}
        data["prefix_information"] = self.prefix_information
        data["notice"] = None if self.prefix_information else LOAD_SHAPE_ONLY
        data["definition"] = DEFINITION if self.prefix_information else None
        return data


def characterize(
    records: Iterable[TraceRecord],
    *,
    block_tokens: int | None,
    chained_ids: bool = True,
    capacities_tokens: Sequence[int] = DEFAULT_CAPACITIES_TOKENS,
    warmup_requests: int = 0,
) -> TraceProfile:
    """`block_tokens` None: the trace has no prefix information, and no hit figures."""
    pass_ = _OnePass(block_tokens, chained_ids, warmup_requests)
    for record in records:
        pass_.add(record)
    return pass_.profile(capacities_tokens)


class _OnePass:
    def __init__(self, block_tokens: int | None, chained_ids: bool, warmup: int) -> None:
        self.block_tokens = block_tokens
        self.warmup = warmup
        self.inputs: Counter[int] = Counter()
        self.outputs: Counter[int] = Counter()
        self.arrivals = ArrivalProfile()
        self.sessions = SessionProfile()
        self.hits = PrefixHits(block_tokens, chained_ids, warmup) if block_tokens else None
        self.block_accesses = 0

    def add(self, record: TraceRecord) -> None:
        self.inputs[record.input_tokens] += 1
        self.outputs[record.output_tokens] += 1
        if record.arrival_s is not None:
            self.arrivals.add(record.arrival_s)
        self.sessions.add(record.session)
        if self.hits is not None and record.block_ids is not None:
            self.block_accesses += len(record.block_ids)
            self.hits.add(record)

    def profile(self, capacities_tokens: Sequence[int]) -> TraceProfile:
        base = TraceProfile(
            requests=sum(self.inputs.values()),
            block_accesses=self.block_accesses,
            distinct_blocks=len(self.hits.stack) if self.hits else 0,
            input_tokens=sum(n * c for n, c in self.inputs.items()),
            output_tokens=sum(n * c for n, c in self.outputs.items()),
            block_tokens=None,  # until a request with blocks is seen
            measured_from_request=self.warmup,
            input_length=count_summary(self.inputs),
            output_length=count_summary(self.outputs),
            arrivals=self.arrivals.to_dict(),
            sessions=self.sessions.to_dict(),
        )
        if self.hits is None or not self.hits.requests:
            return base
        curve = self.hits.curve()
        return replace(
            base,
            block_tokens=self.block_tokens,
            infinite_cache_hit_ratio=curve.ceiling(),
            hit_ratio_at={c: curve.at(c) for c in sorted(set(capacities_tokens))},
            hit_ratio_curve=curve.points(),
            reuse_distance=self.hits.reuse_to_dict(),
        )
