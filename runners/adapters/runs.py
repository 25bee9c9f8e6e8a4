"""The normalized benchmark run shared by the load-generator adapters (vllm-bench, guidellm).

Pure; imports no Django. See docs/adapters.md for the meaning of each key.
"""

from __future__ import annotations

from typing import Any

# Every run carries these keys, in this order; a value the source lacks is None, never 0.
RUN_KEYS = (
    "label",
    "max_concurrency",
    "request_rate",
    "request_rate_unlimited",
    "num_prompts",
    "completed",
    "failed",
    "incomplete",
    "duration_s",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2el_ms",
    "model_id",
)

# Latency groups every run reports (None when the source has no summary for them).
LATENCY_GROUPS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


def build_run(values: dict[str, Any]) -> dict[str, Any]:
    """A run with every RUN_KEYS key (missing ones None), then any tool-specific extras."""
    run = {key: values.get(key) for key in RUN_KEYS}
    run.update((key, value) for key, value in values.items() if key not in run)
    if run["completed"] == 0:
        _drop_latencies(run)
    return run


def _drop_latencies(run: dict[str, Any]) -> None:
    # With no completed request every latency summary is a placeholder (vLLM writes 0.0), and
    # a 0 ms TTFT would read as the fastest run ever measured; report them as unknown instead.
    for key in list(run):
        if key.endswith("_ms") and isinstance(run[key], dict):
            run[key] = None
