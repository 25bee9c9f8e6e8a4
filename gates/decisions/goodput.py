"""Goodput: the share of one bench's requests that completed within a clause's SLO (TTFT and
TPOT bounds), read from the bench's per-request numbers, and the SLO said in words.
Pure: plain data in, plain data out; imports no Django.

The rules follow vLLM's `--goodput` (vllm/benchmarks/serve.py, calculate_metrics): a request
meets the SLO when every stated bound holds with `<=`; its TPOT is (e2el - ttft) / (output
tokens - 1), and an output of one token has no TPOT, so it meets a TPOT bound (vLLM counts its
TPOT as 0). Unlike vLLM's goodput (good requests per second), this is a share of the requests
sent, so a failed request counts against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from documents.spec import SloSpec
from gates.decisions.numbers import finite_float
from gates.specs.words import slo_words


@dataclass(frozen=True)
class Slo:
    """The bounds a request must meet, in ms; None where the clause states none."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None

    @classmethod
    def from_spec(cls, spec: SloSpec) -> Slo:
        ttft, tpot = spec.get("ttft_ms"), spec.get("tpot_ms")
        return cls(None if ttft is None else float(ttft), None if tpot is None else float(tpot))

    def as_document(self) -> SloSpec:
        stated: SloSpec = {}
        if self.ttft_ms is not None:
            stated["ttft_ms"] = self.ttft_ms
        if self.tpot_ms is not None:
            stated["tpot_ms"] = self.tpot_ms
        return stated

    @property
    def text(self) -> str:
        """'TTFT ≤ 2 s and TPOT ≤ 50 ms', as the spec's words say it."""
        return slo_words(self.as_document())


@dataclass(frozen=True)
class BenchShare:
    """How many of a bench's requests met the SLO, of how many it sent."""

    met: int
    requests: int

    @property
    def share(self) -> float:
        return self.met / self.requests


def bench_goodput(per_request: object, slo: Slo) -> BenchShare | str:
    """The bench's requests within `slo`, or why its per-request numbers cannot say (text)."""
    if not isinstance(per_request, Mapping):
        return "keeps no per-request numbers"
    needed = ["ttft_ms"] + (["e2el_ms", "output_tokens"] if slo.tpot_ms is not None else [])
    found = [per_request.get(name) for name in needed]
    missing = [name for name, values in zip(needed, found, strict=True) if values is None]
    if missing:
        return f"keeps no per-request {', '.join(missing)}"
    arrays = [values for values in found if isinstance(values, list)]
    if len(arrays) < len(needed):
        return "has per-request numbers that are not lists"
    if len({len(values) for values in arrays}) > 1 or not arrays[0]:
        return "has per-request lists of different lengths or none at all"
    # Without a TPOT bound only TTFTs are read: the other columns stand empty.
    columns = arrays + [[None] * len(arrays[0])] * (3 - len(arrays))
    met = sum(request_meets(slo, *row) for row in zip(*columns, strict=True))
    return BenchShare(met, len(arrays[0]))


def request_meets(slo: Slo, ttft: Any, e2el: Any = None, output_tokens: Any = None) -> bool:
    """Whether one request completed within every bound; a failed request (no TTFT) does not,
    and neither does one whose TPOT cannot be computed for want of its numbers."""
    first = finite_float(ttft)
    if first is None:
        return False
    if slo.ttft_ms is not None and first > slo.ttft_ms:
        return False
    if slo.tpot_ms is None:
        return True
    tpot = request_tpot(first, finite_float(e2el), finite_float(output_tokens))
    return tpot is not None and tpot <= slo.tpot_ms


def request_tpot(ttft: float, e2el: float | None, output_tokens: float | None) -> float | None:
    """vLLM's TPOT of one request in ms; 0 for a one-token output (no token after the first),
    None where the end-to-end latency or the token count is unknown."""
    if e2el is None or output_tokens is None:
        return None
    if output_tokens <= 1:
        return 0.0
    return (e2el - ttft) / (output_tokens - 1)
