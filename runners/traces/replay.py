"""A trace turned into the requests every arm replays: one seeded set of token-id prompts that
reproduces the trace's prefix sharing (each block key -> one fixed run of token ids), the
trace's arrival times (open loop, optionally scaled), an unmeasured warm-up window, and
down-sampling by session or prefix tree (never by request, which would break reuse).
Pure and deterministic: the same trace and settings give the same bytes on every arm.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from runners.traces.prefix_hits import BlockKeys
from runners.traces.records import TraceRecord

# Token ids are drawn from [low, high): above the ids tokenizers keep for special tokens and
# below every real vocabulary Tollgate serves (the tiny test models have 32k).
DEFAULT_TOKEN_RANGE = (1000, 30000)
SAMPLE_SCALE = 2**64


@dataclass(frozen=True)
class ReplaySettings:
    seed: int
    block_tokens: int | None  # None: a load-shape trace, every prompt its own
    chained_ids: bool = True
    time_scale: float = 1.0  # multiplies the gaps between arrivals
    sample_fraction: float = 1.0  # share of sessions / prefix trees kept
    warmup_s: float = 0.0  # sent, not measured: the caches fill first
    token_range: tuple[int, int] = DEFAULT_TOKEN_RANGE


@dataclass(frozen=True)
class ReplayRequest:
    index: int  # position among the kept requests
    send_at_s: float | None  # from the replay's start; None: the trace has no times
    prompt_token_ids: tuple[int, ...]
    output_tokens: int
    group: str  # the session or prefix tree it was sampled with
    measured: bool

    def to_json(self) -> bytes:
        """One canonical JSON line: what the client sends, byte for byte on every arm."""
        data = {
            "index": self.index,
            "send_at_s": self.send_at_s,
            "prompt_token_ids": list(self.prompt_token_ids),
            "output_tokens": self.output_tokens,
            "group": self.group,
            "measured": self.measured,
        }
        return json.dumps(data, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class KeptRequest:
    """A trace request the replay sends, before any client's format: where it came from, its
    block keys, its schedule and whether it is measured."""

    index: int  # position among the kept requests
    position: int  # position in the trace
    record: TraceRecord
    block_keys: list[int] | None
    send_at_s: float | None
    group: str
    measured: bool


def kept_requests(
    records: Iterable[TraceRecord], settings: ReplaySettings
) -> Iterator[KeptRequest]:
    """The requests every replay format sends, in arrival order: one sampling, one schedule and
    one warm-up window, whichever client then reads them."""
    keys = BlockKeys(settings.chained_ids)
    start: float | None = None
    index = 0
    for position, record in enumerate(records):
        block_keys = keys.of(record.block_ids) if record.block_ids is not None else None
        group = sample_group(record, block_keys, position)
        if not kept(group, settings):
            continue
        if record.arrival_s is not None and start is None:
            start = record.arrival_s
        offset = None if record.arrival_s is None or start is None else record.arrival_s - start
        yield KeptRequest(
            index=index,
            position=position,
            record=record,
            block_keys=block_keys,
            send_at_s=None if offset is None else offset * settings.time_scale,
            group=group,
            measured=offset is None or offset >= settings.warmup_s,
        )
        index += 1


def replay_requests(
    records: Iterable[TraceRecord], settings: ReplaySettings
) -> Iterator[ReplayRequest]:
    """The kept requests with their token ids, streamed (a prompt is built when it is reached)."""
    for request in kept_requests(records, settings):
        yield ReplayRequest(
            index=request.index,
            send_at_s=request.send_at_s,
            prompt_token_ids=prompt_tokens(
                request.record, request.block_keys, request.position, settings
            ),
            output_tokens=request.record.output_tokens,
            group=request.group,
            measured=request.measured,
        )


def sample_group(record: TraceRecord, block_keys: list[int] | None, position: int) -> str:
    """What a request is sampled with: its session, else its prefix tree (the key of its first
    block, shared by every request under that root); a request with neither stands alone."""
    if record.session is not None:
        return f"session:{record.session}"
    if block_keys:
        return f"tree:{block_keys[0]}"
    return f"request:{position}"


def kept(group: str, settings: ReplaySettings) -> bool:
    """A seeded coin per group, so a whole session or prefix tree is kept or dropped."""
    if settings.sample_fraction >= 1.0:
        return True
    digest = hashlib.blake2b(f"{settings.seed}:{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < settings.sample_fraction * SAMPLE_SCALE


def prompt_length(
    record: TraceRecord, block_keys: list[int] | None, block_tokens: int | None
) -> int:
    """How many tokens the prompt has: the trace's count, cut to what its blocks cover."""
    if not block_keys or not block_tokens:
        return record.input_tokens
    return min(record.input_tokens, len(block_keys) * block_tokens)


def prompt_tokens(
    record: TraceRecord, block_keys: list[int] | None, position: int, settings: ReplaySettings
) -> tuple[int, ...]:
    """The prompt's token ids: each block's fixed ids (the last block cut to the remainder), so
    equal block keys give equal token prefixes; without blocks, ids of the request's own."""
    if not block_keys or not settings.block_tokens:
        return tuple(_token_run(settings, ("request", position), record.input_tokens))
    block = settings.block_tokens
    tokens: list[int] = []
    for number, key in enumerate(block_keys):
        size = min(block, record.input_tokens - number * block)
        if size <= 0:
            break
        tokens.extend(_token_run(settings, ("block", key), block)[:size])
    return tuple(tokens)


def _token_run(settings: ReplaySettings, name: tuple[str, int], length: int) -> list[int]:
    """`length` token ids fixed by the seed and the name (a block key or a request position)."""
    kind = 0 if name[0] == "block" else 1
    generator = np.random.default_rng([settings.seed, kind, name[1] & (2**63 - 1)])
    low, high = settings.token_range
    ids: list[int] = generator.integers(low, high, size=length, dtype=np.int64).tolist()
    return ids


def replay_file_lines(requests: Iterable[ReplayRequest]) -> Iterator[bytes]:
    return (request.to_json() for request in requests)


def replay_digest(requests: Iterable[ReplayRequest]) -> str:
    """SHA-256 of the replay's canonical lines: every arm's record names it, and equal digests
    prove the arms were sent the same prompts at the same times."""
    digest = hashlib.sha256()
    for line in replay_file_lines(requests):
        digest.update(line)
    return digest.hexdigest()
