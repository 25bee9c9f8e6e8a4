"""Emulated tokenizer and text generator: a token is a whitespace-separated word.

Greedy output is a pure function of the prompt, so two servers given the same prompt at
temperature 0 answer the same text. Pure logic; imports only the standard library.
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Dict, List, Optional, Sequence

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fu", "gi", "he")
VOCAB: List[str] = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
_WRONG_OUTPUT_SALT = 0x5EED


def tokenize(text: str) -> List[str]:
    return text.split()


def block_hashes(words: Sequence[str], block_size: int) -> List[int]:
    """Chained hashes of the full blocks of a prompt, as vLLM's prefix cache keys them.

    Python's own hash: fast, and only compared inside one server process (string hashing is
    salted per process), which is all a prefix cache needs."""
    hashes: List[int] = []
    previous = 0
    for start in range(0, len(words) - block_size + 1, block_size):
        previous = hash((previous, tuple(words[start : start + block_size])))
        hashes.append(previous)
    return hashes


def prompt_seed(prompt: str) -> int:
    """A 64-bit fingerprint of the prompt text, the same in every process and on every host."""
    digest = hashlib.blake2b(prompt.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def render_chat(messages: Sequence[Dict[str, str]]) -> str:
    """A minimal chat template: role markers before each message, then the assistant turn."""
    lines = ["<|{}|> {}".format(m["role"], m["content"]) for m in messages]
    lines.append("<|assistant|>")
    return "\n".join(lines)


class OutputText:
    """The words a request will produce, one per engine token."""

    def __init__(
        self,
        prompt_fingerprint: int,
        temperature: float,
        seed: Optional[int] = None,
        wrong: bool = False,
    ) -> None:
        if temperature == 0:
            base = prompt_fingerprint
        elif seed is not None:
            base = hash((prompt_fingerprint, seed)) & (2**63 - 1)
        else:
            base = int.from_bytes(os.urandom(8), "big")
        self.salt = base
        self._rng = random.Random(base)  # noqa: S311 - text, not secrets
        # A corrupted KV load keeps the first token and then diverges.
        self._wrong_rng = random.Random(base ^ _WRONG_OUTPUT_SALT) if wrong else None  # noqa: S311
        self._count = 0

    def next_word(self) -> str:
        index = self._rng.randrange(len(VOCAB))
        if self._wrong_rng is not None and self._count > 0:
            index = self._wrong_rng.randrange(len(VOCAB))
        self._count += 1
        return VOCAB[index]
