"""Emulated tokenizer and text generator, with a real tokenizer.

Tokens are counted by a small byte-level BPE (`simhost/tokenizer.json`, trained offline on this
project's docs with the `tokenizers` library; the tiny model of `make test-vllm` uses the same
file), so a client counting with that tokenizer sees the lengths it sent. Generated text is
drawn from the whole-word tokens of that vocabulary (each one token, a leading space and
letters), so a prompt of N such words is exactly N tokens. Greedy output is a pure function of
the prompt, so two servers given the same prompt at temperature 0 answer the same text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Hashable, List, Optional, Sequence, Tuple

if TYPE_CHECKING:  # imported where used: the host probes run on a bare Python
    from tokenizers import Tokenizer

TOKENIZER_FILE = Path(__file__).with_name("tokenizer.json")
WORDS_FILE = Path(__file__).with_name("words.json")
_WRONG_OUTPUT_SALT = 0x5EED


@functools.lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    # Imported here: the host probes (`simhost smi`, `tier`, `version`) run on a bare Python.
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER_FILE))


def tokenize(text: str) -> List[int]:
    """Token ids as vLLM counts a prompt of this model (no special tokens added)."""
    ids = _whole_word_ids(text)
    return ids if ids is not None else tokenizer().encode(text, add_special_tokens=False).ids


def _whole_word_ids(text: str) -> Optional[List[int]]:
    """The ids of a text made only of whole-word tokens (what simhost's clients send), read off
    a table; None for anything else. The byte-level pre-tokenizer splits such a text at each
    leading space and every piece is one token, so the table gives the tokenizer's own answer
    (tests/simhost/test_textgen.py) about 30x faster: on a busy 2-core box a 12k-token prompt
    took the tokenizer 150 ms, which every long-context bench paid per request."""
    if not text.startswith(" "):
        return None
    table = _word_ids()
    try:
        return [table[piece] for piece in text[1:].split(" ")]
    except KeyError:
        return None


@functools.lru_cache(maxsize=1)
def _word_ids() -> Dict[str, int]:
    words = vocab()
    encodings = tokenizer().encode_batch(words, add_special_tokens=False)
    return {
        word[1:]: encoding.ids[0]
        for word, encoding in zip(words, encodings)  # noqa: B905 (Python 3.9)
        if len(encoding.ids) == 1
    }


@functools.lru_cache(maxsize=512)
def _cached_ids(text: str) -> Tuple[int, ...]:
    return tuple(tokenize(text))


def cached_tokenize(text: str) -> List[int]:
    """tokenize, remembering the last 512 prompts: a resumed turn re-sends its seeded prompt,
    and at a short --time-scale a 4k-token encode (about 6 ms here) would otherwise outweigh
    the emulated GPU time it is meant to leave alone (docs/simhost.md, "Fidelity")."""
    return list(_cached_ids(text))


def detokenize(ids: Sequence[int]) -> str:
    return tokenizer().decode(list(ids), skip_special_tokens=False)


def vocab_size() -> int:
    return tokenizer().get_vocab_size()


@functools.lru_cache(maxsize=1)
def vocab() -> List[str]:
    """The whole-word tokens text is drawn from (simhost/words.json, so the bench needs no
    tokenizer: a bare Python 3.9 host runs it)."""
    with open(WORDS_FILE) as handle:
        words: List[str] = json.load(handle)
        return words


def word_tokens() -> List[str]:
    """What words.json holds: the tokenizer's ' ' + ASCII letter tokens that are one token on
    their own (tests/simhost/test_textgen.py checks the file against this)."""
    found = []
    for index in range(vocab_size()):
        text = tokenizer().decode([index])
        word = len(text) >= 3 and text[0] == " " and text[1:].isascii() and text[1:].isalpha()
        if word and tokenize(text) == [index]:
            found.append(text)
    return found


def join_words(words: Sequence[str]) -> str:
    """Whole-word tokens as text: one token each (their leading space is the separator)."""
    return "".join(words)


def block_hashes(words: Sequence[Hashable], block_size: int) -> List[int]:
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
        words = vocab()
        index = self._rng.randrange(len(words))
        if self._wrong_rng is not None and self._count > 0:
            index = self._wrong_rng.randrange(len(words))
        self._count += 1
        return words[index]
