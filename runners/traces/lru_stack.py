"""Mattson's LRU stack distance in O(log n) per access. Pure.

Each key holds one mark at the time slot of its last touch; the distance of a key is the number
of marks after its own (the distinct keys touched since). Marks live in a bytearray of slots
(counted in C) and a Fenwick (binary indexed) tree of marks per chunk of slots, so a request's
blocks, whose slots sit together, cost one tree update per chunk rather than one per block.
Slots are compacted when they run out, so memory follows the number of distinct keys, not the
number of accesses.
"""

from __future__ import annotations

from collections import Counter

CHUNK_BITS = 8  # 256 slots per Fenwick leaf
MIN_CHUNKS = 64


class LruStack:
    def __init__(self) -> None:
        self._slot_of: dict[int, int] = {}  # key -> the time slot of its last touch
        self._marks = bytearray(MIN_CHUNKS << CHUNK_BITS)  # 1 at each key's slot
        self._tree = [0] * (MIN_CHUNKS + 1)  # Fenwick over marks per chunk, 1-based
        self._next_slot = 0

    def __len__(self) -> int:
        return len(self._slot_of)

    def distance(self, key: int) -> int | None:
        """Distinct keys touched since `key` was last touched; None if it never was. A cache of
        C keys under LRU holds `key` exactly when this is below C."""
        return self.look_up([key])[0]

    def touch(self, key: int) -> None:
        """Move `key` to the top of the stack."""
        self.look_up_then_touch([key])

    def look_up(self, keys: list[int]) -> list[int | None]:
        slot_of, marks, live = self._slot_of, self._marks, len(self._slot_of)
        before_chunk: dict[int, int] = {}  # chunk -> marks in the chunks before it
        distances: list[int | None] = []
        for key in keys:
            slot = slot_of.get(key)
            if slot is None:
                distances.append(None)
                continue
            chunk = slot >> CHUNK_BITS
            if chunk not in before_chunk:
                before_chunk[chunk] = self._marks_before(chunk)
            up_to_slot = before_chunk[chunk] + marks.count(1, chunk << CHUNK_BITS, slot + 1)
            distances.append(live - up_to_slot)
        return distances

    def look_up_then_touch(self, keys: list[int]) -> list[int | None]:
        """Every key's distance before any is touched, then the keys touched from the last to
        the first (so the first ends on top): one request's work."""
        distances = self.look_up(keys)
        if self._next_slot + len(keys) > len(self._marks):
            self._compact(room=len(keys))
        slot_of, marks, next_slot = self._slot_of, self._marks, self._next_slot
        changes: Counter[int] = Counter()  # chunk -> change in its marks
        for key in reversed(keys):
            old = slot_of.get(key)
            if old is not None:
                marks[old] = 0
                changes[old >> CHUNK_BITS] -= 1
            slot_of[key] = next_slot
            marks[next_slot] = 1
            changes[next_slot >> CHUNK_BITS] += 1
            next_slot += 1
        self._next_slot = next_slot
        for chunk, change in changes.items():
            if change:
                self._add(chunk, change)
        return distances

    def _marks_before(self, chunk: int) -> int:
        tree, index, total = self._tree, chunk, 0
        while index:
            total += tree[index]
            index &= index - 1
        return total

    def _add(self, chunk: int, change: int) -> None:
        tree, index = self._tree, chunk + 1
        while index < len(tree):
            tree[index] += change
            index += index & -index

    def _compact(self, room: int) -> None:
        """Renumber the live keys 0..n-1 in stack order, with as many free slots again (and at
        least `room`), and rebuild the tree in linear time."""
        ordered = sorted(self._slot_of, key=self._slot_of.__getitem__)
        self._slot_of = {key: slot for slot, key in enumerate(ordered)}
        slots = 2 * len(ordered) + room
        chunks = max(MIN_CHUNKS, (slots >> CHUNK_BITS) + 1)
        self._marks = bytearray(b"\x01" * len(ordered)) + bytearray(
            (chunks << CHUNK_BITS) - len(ordered)
        )
        tree = [0] * (chunks + 1)
        for index in range(1, chunks + 1):
            start = (index - 1) << CHUNK_BITS
            tree[index] += self._marks.count(1, start, start + (1 << CHUNK_BITS))
            parent = index + (index & -index)
            if parent <= chunks:
                tree[parent] += tree[index]
        self._tree = tree
        self._next_slot = len(ordered)
