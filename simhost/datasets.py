"""Workloads for `simhost bench`: random, prefix_repetition and cold_recovery prompts.

Pure and reproducible: the same arguments and seed give the same prompts. Standard library only.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import List, Optional

from simhost.textgen import join_words, vocab


@dataclass(frozen=True)
class SampleRequest:
    prompt: str
    prompt_len: int
    output_len: int


@dataclass(frozen=True)
class Workload:
    """Requests in phase order; only `measured` goes into the result file."""

    measured: List[SampleRequest]
    warmup: List[SampleRequest] = field(default_factory=list)
    flush: List[SampleRequest] = field(default_factory=list)


@dataclass(frozen=True)
class DatasetSpec:
    """The dataset flags of `vllm bench serve` that simhost understands."""

    name: str
    num_prompts: int
    seed: int = 0
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_prefix_len: int = 0
    prefix_len: int = 256
    suffix_len: int = 256
    num_prefixes: int = 10
    prefix_output_len: int = 128
    disable_shuffle: bool = False
    flush_tokens: Optional[int] = None  # cold_recovery: eviction traffic, in prompt tokens


def _words(rng: random.Random, count: int) -> List[str]:
    return rng.choices(vocab(), k=count)


def _sample(words: List[str], output_len: int) -> SampleRequest:
    return SampleRequest(prompt=join_words(words), prompt_len=len(words), output_len=output_len)


def random_requests(spec: DatasetSpec, rng: random.Random) -> List[SampleRequest]:
    """Random prompts after an optional shared prefix; lengths spread by the range ratio."""
    prefix = _words(rng, spec.random_prefix_len)
    low = max(1, int(spec.random_input_len * (1 - spec.random_range_ratio)))
    high = max(low, int(spec.random_input_len * (1 + spec.random_range_ratio)))
    out_low = max(1, int(spec.random_output_len * (1 - spec.random_range_ratio)))
    out_high = max(out_low, int(spec.random_output_len * (1 + spec.random_range_ratio)))
    requests = []
    for _ in range(spec.num_prompts):
        words = prefix + _words(rng, rng.randint(low, high))
        requests.append(_sample(words, rng.randint(out_low, out_high)))
    return requests


def prefix_repetition_requests(
    spec: DatasetSpec, rng: random.Random, prefixes: List[List[str]]
) -> List[SampleRequest]:
    """`num_prompts` prompts spread over the prefixes, each with a fresh random suffix."""
    requests = []
    for index in range(spec.num_prompts):
        prefix = prefixes[index % len(prefixes)]
        words = prefix + _words(rng, spec.suffix_len)
        requests.append(_sample(words, spec.prefix_output_len))
    if not spec.disable_shuffle:
        rng.shuffle(requests)
    return requests


def cold_recovery_workload(spec: DatasetSpec, rng: random.Random) -> Workload:
    """docs/gates.md "cold_recovery": seed every timed prompt once (one output token), push the
    sessions out of GPU memory with unrelated prompts of the same size, then send the timed
    prompts again; only those are measured. The Tollgate `vllm` profile does the same with
    three `vllm bench serve` runs (only identical arguments reproduce vllm bench's prompts)."""
    prefixes = [_words(rng, spec.prefix_len) for _ in range(spec.num_prefixes)]
    measured = prefix_repetition_requests(spec, rng, prefixes)
    warmup = [SampleRequest(r.prompt, r.prompt_len, 1) for r in measured]
    size = spec.prefix_len + spec.suffix_len
    flush_count = math.ceil((spec.flush_tokens or 0) / size)
    flush = [_sample(_words(rng, size), 1) for _ in range(flush_count)]
    return Workload(measured=measured, warmup=warmup, flush=flush)


def build_workload(spec: DatasetSpec) -> Workload:
    rng = random.Random(spec.seed)  # noqa: S311 - reproducible prompts, not secrets
    if spec.name == "random":
        return Workload(measured=random_requests(spec, rng))
    if spec.name == "prefix_repetition":
        prefixes = [_words(rng, spec.prefix_len) for _ in range(spec.num_prefixes)]
        return Workload(measured=prefix_repetition_requests(spec, rng, prefixes))
    if spec.name == "cold_recovery":
        return cold_recovery_workload(spec, rng)
    raise ValueError("--dataset-name: unknown dataset {!r}".format(spec.name))
