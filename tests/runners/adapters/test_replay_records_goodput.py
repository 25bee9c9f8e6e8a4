"""A replay's per-request numbers carry what a goodput clause reads: TTFT, end-to-end latency
and output tokens, in send order, failed requests as None."""

from __future__ import annotations

import json

from gates.decisions.goodput import BenchShare, Slo, bench_goodput
from runners.adapters.replay_records import parse_replay_records


def line(index: int, sent_s: float, ok: bool, output_tokens: int, ttft: float, e2el: float) -> str:
    return json.dumps(
        {
            "index": index,
            "sent_s": sent_s,
            "ok": ok,
            "prompt_tokens": 100,
            "output_tokens": output_tokens,
            "ttft_ms": ttft,
            "e2el_ms": e2el,
        }
    )


def test_a_replay_keeps_output_tokens_per_request_for_the_tpot_bound():
    text = "\n".join(
        [
            line(1, 0.2, True, 11, 100.0, 700.0),  # TPOT 60 ms
            line(0, 0.1, True, 11, 100.0, 500.0),  # TPOT 40 ms
            line(2, 0.3, False, 0, 100.0, 200.0),
        ]
    )
    per_request = parse_replay_records(text)["runs"][0]["per_request"]
    assert per_request["output_tokens"] == [11, 11, None]
    assert bench_goodput(per_request, Slo(tpot_ms=50)) == BenchShare(met=1, requests=3)
