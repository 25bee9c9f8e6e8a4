"""`python -m simhost.bench.replay`: send a trace replay file open loop and keep each request.

The replay file is Tollgate's (runners.traces.replay): one JSON line per request with
`index`, `send_at_s` (from the replay's start), `prompt_token_ids`, `output_tokens` and
`measured`. Every request leaves at its own time whatever the others are doing (open loop),
as token ids to /v1/completions with ignore_eos, so the server sees the trace's exact lengths
and prefix tree. Writes one JSON line per request: `index`, `send_at_s`, `sent_s`, `ok`,
`prompt_tokens` and `output_tokens` (the server's usage), `ttft_ms`, `itl_ms`, `e2el_ms`,
`measured`, `error`. Python 3.9, standard library only; imports nothing from Tollgate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any, Dict, List, Optional

from simhost.bench.client import (
    Endpoint,
    PendingOutcome,
    PreparedRequest,
    first_model,
    send_request,
)
from simhost.bench.http import HttpClient

# Time to encode nothing more and let the loop settle before the first send.
LEAD_S = 0.2


def read_replay(lines: List[str]) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]


def prepare(request: Dict[str, Any], model: str) -> PreparedRequest:
    """The request body, encoded before the clock starts."""
    body = {
        "model": model,
        "prompt": request["prompt_token_ids"],
        "max_tokens": request["output_tokens"],
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    return PreparedRequest(json.dumps(body).encode(), len(request["prompt_token_ids"]))


async def replay(
    base_url: str,
    requests: List[Dict[str, Any]],
    timeout_s: float,
    max_concurrency: Optional[int] = None,
) -> List[Dict[str, Any]]:
    """Each request at its time; with `max_concurrency`, one whose time comes while that many
    are in flight waits for a slot, and its `sent_s` says when it really left (the fidelity
    check then reports the replay late rather than the load silently reshaped)."""
    client = HttpClient(base_url, timeout_s)
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    try:
        model = await first_model(client)
        endpoint = Endpoint(base_url, "/v1/completions", False, model, 0.0, True)
        prepared = [prepare(request, model) for request in requests]
        start = time.perf_counter() + LEAD_S
        pending = await asyncio.gather(
            *(_at(client, endpoint, body, start, r, slots) for r, body in zip(requests, prepared))  # noqa: B905 (3.9)
        )
    finally:
        client.close()
    return [_record(r, p, start) for r, p in zip(requests, pending)]  # noqa: B905 (3.9)


async def _at(
    client: HttpClient,
    endpoint: Endpoint,
    body: PreparedRequest,
    start: float,
    request: Dict[str, Any],
    slots: Optional[asyncio.Semaphore] = None,
) -> PendingOutcome:
    send_at = request.get("send_at_s") or 0.0
    delay = start + send_at - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    if slots is None:
        return await send_request(client, endpoint, body)
    async with slots:
        return await send_request(client, endpoint, body)


def _record(request: Dict[str, Any], pending: PendingOutcome, start: float) -> Dict[str, Any]:
    outcome = pending.finish()
    ok = outcome.success
    return {
        "index": request["index"],
        "send_at_s": request.get("send_at_s"),
        "sent_s": outcome.start_time - start,
        "ok": ok,
        "prompt_tokens": outcome.prompt_tokens,
        "output_tokens": outcome.output_tokens if ok else None,
        "ttft_ms": outcome.ttft * 1000.0 if ok else None,
        "itl_ms": [gap * 1000.0 for gap in outcome.itl],
        "e2el_ms": outcome.latency * 1000.0 if ok else None,
        "measured": request.get("measured", True),
        "error": outcome.error or None,
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simhost.bench.replay", description=__doc__)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--replay", required=True, help="the replay file (JSON lines)")
    parser.add_argument("--records", required=True, help="where to write one line per request")
    parser.add_argument("--request-timeout", type=float, default=600.0)
    parser.add_argument(
        "--max-concurrency", type=int, default=None, help="requests in flight at most (a tier)"
    )
    options = parser.parse_args(argv)
    with open(options.replay, encoding="utf-8") as stream:
        requests = read_replay(stream.readlines())
    try:
        records = asyncio.run(
            replay(options.base_url, requests, options.request_timeout, options.max_concurrency)
        )
    except OSError as error:
        print("simhost replay: {}: {}".format(options.base_url, error), file=sys.stderr)
        return 1
    with open(options.records, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\n" for record in records)
    failed = sum(1 for record in records if not record["ok"])
    print("replayed {} requests, {} failed".format(len(records), failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
