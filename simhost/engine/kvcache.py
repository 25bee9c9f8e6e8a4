"""KV block bookkeeping: the GPU block pool with an LRU of cached prefix blocks, and the CPU tier.

Pure logic (no I/O, no clock); imports only the standard library.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Optional, Sequence


class GpuBlockPool:
    """Physical GPU KV blocks. Blocks are in use (held by running requests), free but still
    holding a cached prefix block (kept in LRU order, evicted first-in first-out), or empty."""

    def __init__(self, num_blocks: int, caching: bool) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self.in_use = 0
        self._empty = num_blocks
        self._refs: Dict[int, int] = {}  # hash -> running requests referencing that block
        self._lru: "OrderedDict[int, None]" = OrderedDict()  # free blocks that still hold data
        self.evictions = 0

    def free_capacity(self) -> int:
        return self._empty + len(self._lru)

    def usage(self) -> float:
        return self.in_use / self.num_blocks if self.num_blocks else 0.0

    def contains(self, block_hash: int) -> bool:
        return block_hash in self._refs or block_hash in self._lru

    def cached_in_lru(self, block_hash: int) -> bool:
        return block_hash in self._lru

    def count_hits(self, hashes: Sequence[int], limit: int) -> int:
        """Length of the longest prefix of `hashes` (at most `limit`) present in GPU memory."""
        if not self.caching:
            return 0
        hits = 0
        for block_hash in hashes[:limit]:
            if not self.contains(block_hash):
                break
            hits += 1
        return hits

    def share(self, block_hash: int) -> None:
        """Reference a cached block for a new request (a prefix cache hit)."""
        if block_hash in self._lru:
            del self._lru[block_hash]
            self.in_use += 1
            self._refs[block_hash] = 1
        else:
            self._refs[block_hash] += 1

    def allocate(self, count: int) -> bool:
        """Take `count` fresh blocks, evicting least recently freed cached blocks if needed."""
        if count > self.free_capacity():
            return False
        while self._empty < count:
            self._lru.popitem(last=False)
            self.evictions += 1
            self._empty += 1
        self._empty -= count
        self.in_use += count
        return True

    def register(self, block_hash: int) -> bool:
        """Publish a just-computed block under its hash; False when another copy already exists
        (the caller's block then stays private, as vLLM keeps only the first copy cached)."""
        if not self.caching or self.contains(block_hash):
            return False
        self._refs[block_hash] = 1
        return True

    def release(self, blocks: Sequence[Optional[int]]) -> None:
        """Free a request's blocks. Reverse order, so a prompt's tail is evicted before its head."""
        for block_hash in reversed(blocks):
            if block_hash is None:
                self.in_use -= 1
                self._empty += 1
                continue
            remaining = self._refs[block_hash] - 1
            if remaining:
                self._refs[block_hash] = remaining  # another request still reads this block
            else:
                del self._refs[block_hash]
                self._lru[block_hash] = None
                self.in_use -= 1


class CpuTier:
    """The bounded offload tier: a copy of every computed block, LRU-evicted when full."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = capacity_blocks
        self._blocks: "OrderedDict[int, None]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def usage(self) -> float:
        return len(self._blocks) / self.capacity_blocks if self.capacity_blocks else 0.0

    def store(self, block_hash: int) -> bool:
        """Keep a block; True when it was not already there (bytes had to move)."""
        if block_hash in self._blocks:
            self._blocks.move_to_end(block_hash)
            return False
        self._blocks[block_hash] = None
        if len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return True

    def count_hits(self, hashes: Sequence[int], start: int, limit: int) -> int:
        """Consecutive blocks of `hashes[start:limit]` held by the tier."""
        hits = 0
        for block_hash in hashes[start:limit]:
            if block_hash not in self._blocks:
                break
            self._blocks.move_to_end(block_hash)
            hits += 1
        return hits


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks needed to hold `tokens` tokens."""
    return -(-tokens // block_size)
