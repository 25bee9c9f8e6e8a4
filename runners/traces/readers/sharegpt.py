"""Multi-turn ShareGPT-style conversations (`{id, conversations: [{from, value}]}`, as a JSON
array or one conversation per line), replayed with their history. Pure.

Turn n+1 re-sends turn n's whole context, so its blocks are the earlier turns' blocks plus new
ones. With no tokenizer the rule is fixed and documented (docs/workloads.md): each message is
serialized as `role + "\\n" + text + "\\n"` in UTF-8, a token is 4 bytes (rounded up), and block j
is the chained SHA-256 of the j-th `4 * block_tokens`-byte chunk over the chunks before it, its
first 8 bytes read as an integer. The text itself is never kept.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from runners.traces.readers import fields
from runners.traces.records import TraceError, TraceRecord

BLOCK_TOKENS = 16
BYTES_PER_TOKEN = 4
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "assistant": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
}


def estimated_tokens(size_bytes: int) -> int:
    return -(-size_bytes // BYTES_PER_TOKEN)


def conversation_records(
    row: dict[str, Any], line: int, block_tokens: int = BLOCK_TOKENS
) -> list[TraceRecord]:
    """One record per user message answered by an assistant message; its output is the
    answer's text alone, its input everything said before plus the question."""
    messages = _messages(row, line)
    session = fields.optional_label(row, "id", line)
    chain = _ChunkChain(block_tokens * BYTES_PER_TOKEN)
    records: list[TraceRecord] = []
    for index, (role, body, _) in enumerate(messages):
        chain.extend(body)
        answer = messages[index + 1] if index + 1 < len(messages) else None
        if role != "user" or answer is None or answer[0] != "assistant":
            continue
        # ceil(ceil(bytes / 4) / block) == ceil(bytes / (4 * block)): the ids meet the block rule.
        input_tokens = estimated_tokens(chain.size)
        output_tokens = estimated_tokens(answer[2])
        turn = len(records) + 1
        records.append(
            TraceRecord(None, input_tokens, output_tokens, chain.block_ids(), session, turn)
        )
    return records


def interleave_sessions(
    conversations: Iterable[list[TraceRecord]], in_flight: int = 1
) -> Iterator[TraceRecord]:
    """Round robin over `in_flight` open conversations, one turn each, as a multi-turn client
    with that many users sends them; 1 sends each conversation whole, in file order."""
    pending = iter(conversations)
    active: deque[deque[TraceRecord]] = deque()
    while True:
        while len(active) < in_flight and (turns := next(pending, None)) is not None:
            if turns:
                active.append(deque(turns))
        if not active:
            return
        turns_left = active.popleft()
        yield turns_left.popleft()
        if turns_left:
            active.append(turns_left)


def _messages(row: dict[str, Any], line: int) -> list[tuple[str, bytes, int]]:
    turns = fields.required(row, "conversations", line)
    if not isinstance(turns, list):
        raise TraceError(line, "conversations", "must be a list of messages")
    messages = []
    for index, turn in enumerate(turns):
        where = f"conversations[{index}]"
        if not isinstance(turn, dict):
            raise TraceError(line, where, "must be an object with `from` and `value`")
        role = ROLES.get(str(turn.get("from")))
        if role is None:
            raise TraceError(line, f"{where}.from", f"unknown speaker {turn.get('from')!r}")
        value = turn.get("value")
        if not isinstance(value, str):
            raise TraceError(line, f"{where}.value", "missing or not a string")
        messages.append((role, f"{role}\n{value}\n".encode(), len(value.encode())))
    return messages


class _ChunkChain:
    """The chained ids of a growing byte string: full chunks are hashed once, as they fill."""

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.tail = b""
        self.size = 0
        self.digest = b""
        self.full_ids: list[int] = []

    def extend(self, data: bytes) -> None:
        self.size += len(data)
        self.tail += data
        while len(self.tail) >= self.chunk_bytes:
            chunk, self.tail = self.tail[: self.chunk_bytes], self.tail[self.chunk_bytes :]
            self.digest = hashlib.sha256(self.digest + chunk).digest()
            self.full_ids.append(_id_of(self.digest))

    def block_ids(self) -> tuple[int, ...]:
        if not self.tail:
            return tuple(self.full_ids)
        partial = hashlib.sha256(self.digest + self.tail).digest()
        return (*self.full_ids, _id_of(partial))


def _id_of(digest: bytes) -> int:
    # 63 bits: a positive int in JSON and numpy alike; a collision needs ~3e9 distinct blocks.
    return int.from_bytes(digest[:8], "big") >> 1
