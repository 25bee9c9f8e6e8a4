"""Log probabilities as vLLM 0.32's OpenAI server returns them, with made-up but deterministic
values (there is no model): the request's `logprobs` / `top_logprobs` / `prompt_logprobs`
validated with vLLM's limits and words, and the completions and chat shapes built from them.

A position's candidates come in vLLM's V1 order: the token that was actually sampled (or, for
the prompt, the token that was there) first, then the top-N by rank. Their values are drawn
from a generator seeded by the request's output salt and the position, so the same request
gets the same numbers on every server; greedy output is always rank 1, as it is on a model.

Pure: no I/O; the tokenizer comes from simhost.textgen.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from simhost.textgen import detokenize, tokenize, vocab, vocab_size

MAX_LOGPROBS = 20  # vLLM's --max-logprobs default
LOWEST = -9999.0  # what vLLM sends for -inf (OpenAI's JSON-safe floor)


class LogprobError(ValueError):
    """A logprobs field vLLM refuses; `param` names it (protocol.py turns it into a 400)."""

    def __init__(self, message: str, param: str, value: Any = None) -> None:
        # vLLM's VLLMValidationError appends the parameter and value to its message.
        extras = ["parameter={}".format(param)]
        if value is not None:
            extras.append("value={}".format(value))
        super().__init__("{} ({})".format(message, ", ".join(extras)))
        self.param = param


@dataclass(frozen=True)
class Candidate:
    token_id: int
    text: str
    logprob: float
    rank: int


Position = Optional[List[Candidate]]  # None: the prompt's first token, which has no logprob


def checked_count(value: Any, name: str) -> Optional[int]:
    """A top-N count as vLLM's request model checks it: an integer >= 0, or -1 for the whole
    vocabulary (a JSON true counts as 1, as pydantic reads it)."""
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if not whole:
        raise LogprobError("`{}` must be an integer.".format(name), name, value)
    count = int(value)
    if count < 0 and count != -1:
        raise LogprobError("`{}` must be a positive value or -1.".format(name), name, count)
    return count


def check_limit(count: Optional[int], kind: str) -> None:
    """vLLM's sampling-parameter check, after the request model's: at most MAX_LOGPROBS.
    `kind` is "sample" (parameter `logprobs`, also for chat's top_logprobs) or "prompt"."""
    if count is None:
        return
    asked = vocab_size() if count == -1 else count
    if asked > MAX_LOGPROBS:
        raise LogprobError(
            "Requested {} logprobs of {}, which is greater than max allowed: {}".format(
                kind, asked, MAX_LOGPROBS
            ),
            "logprobs" if kind == "sample" else "prompt_logprobs",
            asked,
        )


@functools.lru_cache(maxsize=None)
def word_id(word: str) -> int:
    """A generated word's token id (every word of simhost/words.json is one token)."""
    return tokenize(word)[0]


@functools.lru_cache(maxsize=1)
def _word_ids() -> List[int]:
    """The ids of the whole-word tokens generated text is made of: readable alternatives."""
    return [word_id(word) for word in vocab()]


def _descending(rng: random.Random, count: int) -> List[float]:
    """`count` plausible log probabilities, best first (a peaked next-token distribution)."""
    value = -rng.uniform(0.02, 1.2)
    values = []
    for _ in range(count):
        values.append(round(value, 6))
        value -= rng.expovariate(1.4)
    return values


def position(salt: int, index: int, token_id: int, top: int, rank: int) -> List[Candidate]:
    """One position's candidates: the token at `rank` first, then ranks 1..top."""
    rng = random.Random("{}:{}".format(salt, index))  # noqa: S311 - made-up numbers, not secrets
    values = _descending(rng, max(top, rank))
    others = [i for i in rng.sample(_word_ids(), max(top, rank) + 1) if i != token_id]
    ranked = []
    for place in range(1, top + 1):
        chosen = token_id if place == rank else others.pop()
        ranked.append(Candidate(chosen, detokenize([chosen]), values[place - 1], place))
    actual = Candidate(token_id, detokenize([token_id]), values[rank - 1], rank)
    # vLLM's dict: the actual token once, first, then the other ranks in order.
    return [actual] + [c for c in ranked if c.token_id != token_id]


def sample_rank(salt: int, index: int, greedy: bool) -> int:
    """Greedy decoding takes the best token; sampling sometimes takes a lower one."""
    if greedy:
        return 1
    rng = random.Random("rank:{}:{}".format(salt, index))  # noqa: S311
    return rng.choice((1, 1, 1, 2, 2, 3, 5))


def output_positions(
    salt: int, start: int, token_ids: Sequence[int], top: int, greedy: bool
) -> List[List[Candidate]]:
    """The positions of generated tokens `start`, `start + 1`, ... of one sequence (every one
    has candidates: only a prompt's first token has none)."""
    found: List[List[Candidate]] = []
    for offset, token_id in enumerate(token_ids):
        index = start + offset
        found.append(position(salt, index, token_id, top, sample_rank(salt, index, greedy)))
    return found


def prompt_positions(salt: int, token_ids: Sequence[int], top: int) -> List[Position]:
    """The prompt's positions: none for its first token (nothing precedes it), then each
    prompt token at a rank a model would plausibly have given it."""
    found: List[Position] = [None]
    for index in range(1, len(token_ids)):
        rank = sample_rank(~salt, index, greedy=False)
        found.append(position(~salt, index, token_ids[index], top, rank))
    return found


def completion_logprobs(
    token_ids: Sequence[int], positions: Sequence[Position], top: int, offset: int = 0
) -> Dict[str, Any]:
    """`choices[].logprobs` of /v1/completions: the top dict holds the actual token and the
    top `top` (vLLM keeps candidates 0..top of its dict, keyed by text)."""
    result: Dict[str, Any] = {
        "text_offset": [],
        "token_logprobs": [],
        "tokens": [],
        "top_logprobs": [],
    }
    for token_id, candidates in zip(token_ids, positions):  # noqa: B905 (Python 3.9)
        text = detokenize([token_id]) if candidates is None else candidates[0].text
        result["text_offset"].append(offset)
        offset += len(text)
        result["tokens"].append(text)
        if candidates is None:
            result["token_logprobs"].append(None)
            result["top_logprobs"].append(None)
            continue
        result["token_logprobs"].append(max(candidates[0].logprob, LOWEST))
        kept = candidates if top == -1 else candidates[: top + 1]
        result["top_logprobs"].append({c.text: max(c.logprob, LOWEST) for c in kept})
    return result


def _chat_entry(candidate: Candidate) -> Dict[str, Any]:
    return {
        "token": candidate.text,
        "logprob": max(candidate.logprob, LOWEST),
        "bytes": list(candidate.text.encode("utf-8", errors="replace")),
    }


def chat_logprobs(positions: Sequence[List[Candidate]], top: int) -> Dict[str, Any]:
    """`choices[].logprobs` of /v1/chat/completions: `top_logprobs` are the first `top`
    candidates of vLLM's dict, the sampled token among them (first)."""
    content = []
    for candidates in positions:
        entry = _chat_entry(candidates[0])
        kept = candidates if top == -1 else candidates[:top]
        entry["top_logprobs"] = [_chat_entry(c) for c in kept]
        content.append(entry)
    return {"content": content}


def prompt_logprobs_field(positions: Sequence[Position]) -> List[Optional[Dict[str, Any]]]:
    """`prompt_logprobs` as vLLM serializes its Logprob dicts: token id -> logprob, rank,
    decoded token."""
    return [
        None
        if candidates is None
        else {
            str(c.token_id): {"logprob": c.logprob, "rank": c.rank, "decoded_token": c.text}
            for c in candidates
        }
        for candidates in positions
    ]
