"""Mattson's LRU stack distance in O(log n) per access: a Fenwick (binary indexed) tree over
access times holds one mark per key, at the time that key was last touched. Pure.

The distance of a key is the number of distinct keys touched since it was last touched, i.e.
the marks after its own. Times are compacted when the tree fills, so memory stays proportional
to the number of distinct keys, not to the number of accesses.
"""

from __future__ import annotations

MIN_SLOTS = 1024


class LruStack:
    def __init__(self) -> None:
        self._slot_of: dict[int, int] = {}  # key -> the time slot of its last touch
        self._tree = [0] * (MIN_SLOTS + 1)  # Fenwick tree, 1-based
        self._next_slot = 0

    def __len__(self) -> int:
        return len(self._slot_of)

    def distance(self, key: int) -> int | None:
        """Distinct keys touched since `key` was last touched; None if it never was. A cache of
        C keys under LRU holds `key` exactly when this is below C."""
        slot = self._slot_of.get(key)
        if slot is None:
            return None
        tree = self._tree
        marks_up_to_slot = 0
        index = slot + 1
        while index:
            marks_up_to_slot += tree[index]
            index &= index - 1
        return len(self._slot_of) - marks_up_to_slot

    def touch(self, key: int) -> None:
        """Move `key` to the top of the stack."""
        old = self._slot_of.pop(key, None)  # out before a compaction could renumber it
        if old is not None:
            self._add(old + 1, -1)
        if self._next_slot + 1 >= len(self._tree):
            self._compact()
        self._slot_of[key] = self._next_slot
        self._add(self._next_slot + 1, 1)
        self._next_slot += 1

    def _add(self, index: int, delta: int) -> None:
        tree = self._tree
        size = len(tree)
        while index < size:
            tree[index] += delta
            index += index & -index

    def _compact(self) -> None:
        """Renumber the live keys 0..n-1 in stack order, in a tree twice their number."""
        ordered = sorted(self._slot_of, key=self._slot_of.__getitem__)
        self._slot_of = {key: slot for slot, key in enumerate(ordered)}
        size = max(MIN_SLOTS, 2 * len(ordered) + 2)
        tree = [0] * (size + 1)
        for index in range(1, size + 1):
            tree[index] += index <= len(ordered)
            parent = index + (index & -index)
            if parent <= size:
                tree[parent] += tree[index]
        self._tree = tree
        self._next_slot = len(ordered)
