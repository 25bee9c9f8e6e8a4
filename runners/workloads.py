"""What a spec's workload means on the host, shared by the gate programs and the KV planner.
Pure: plain dicts in, numbers out; imports nothing from Django or gates.
"""

from __future__ import annotations

import math
from typing import Any

# vllm bench's own default for --prefix-repetition-num-prefixes.
VLLM_BENCH_NUM_PREFIXES = 10


def workload_num_prefixes(workload: dict[str, Any]) -> int:
    """How many distinct shared prefixes a workload cycles through (what must stay cached).

    Cold recovery by default resumes a session of its own for every measured prompt; plain
    prefix repetition uses vllm bench's default. `num_prefixes` in the workload overrides both.
    """
    prompts = int(workload["num_prompts"])
    if "num_prefixes" in workload:
        return min(int(workload["num_prefixes"]), prompts)
    if workload.get("dataset") == "cold_recovery" or workload.get("cold_recovery"):
        return prompts
    return min(VLLM_BENCH_NUM_PREFIXES, prompts)


def workload_values(workload: dict[str, Any]) -> dict[str, Any]:
    """The values a bench command template takes from a workload (or a G4 soak's load)."""
    keys = ("input_len", "output_len", "prefix_len", "suffix_len", "num_prompts", "dataset")
    values = {key: workload[key] for key in keys if key in workload}
    values.setdefault("input_len", workload.get("prefix_len", 0) + workload.get("suffix_len", 0))
    values["num_prefixes"] = workload_num_prefixes(workload)
    if "num_prompts" in workload:
        # Clients that group prompts by prefix (sglang.bench_serving's generated-shared-prefix)
        # ask how many share each one; rounded up, so no fewer prompts than asked are sent.
        values["prompts_per_prefix"] = -(-int(workload["num_prompts"]) // values["num_prefixes"])
    return values


# The workload fields each dataset's bench command reads (the built-in profiles' templates).
DATASET_FIELDS = {"random": ("input_len", "output_len")} | dict.fromkeys(
    ("prefix_repetition", "cold_recovery"), ("prefix_len", "suffix_len", "output_len")
)
# cold_recovery's flush sends unrelated prompts totalling this many times the server's GPU KV
# cache (docs/gates.md "cold_recovery"); simhost bench uses the same ratio by default.
COLD_RECOVERY_FLUSH_RATIO = 1.2
# Slack on a derived --max-model-len: a tokenizer's decode/encode round trip can add a few
# tokens to vllm bench's prompts, and a chat template or BOS adds some more.
CONTEXT_SLACK_TOKENS = 64


def workload_prompt_tokens(workload: dict[str, Any]) -> int:
    """The prompt length a workload asks for (prefix + suffix, or the random input length)."""
    if "input_len" in workload:
        return int(workload["input_len"])
    return int(workload.get("prefix_len", 0)) + int(workload.get("suffix_len", 0))


def workload_context_tokens(workload: dict[str, Any]) -> int:
    """The longest request a workload sends: its prompt plus its output, in tokens."""
    return workload_prompt_tokens(workload) + int(workload["output_len"])


def spec_context_tokens(spec: dict[str, Any]) -> int | None:
    """The longest request any server of this spec's runs must accept; None when no server runs.

    Equivalence prompts are bounded by their UTF-8 length: a byte-level tokenizer never makes
    more tokens than bytes.
    """
    workloads = [spec.get("workload"), *(spec.get(key, {}).get("workload") for key in _G2_PARTS)]
    needs = [workload_context_tokens(w) for w in workloads if w]
    equivalence = spec.get("equivalence")
    if equivalence and equivalence.get("prompts"):
        longest = max(len(prompt.encode()) for prompt in equivalence["prompts"])
        needs.append(longest + int(equivalence.get("max_tokens", 64)))
    return max(needs) if needs else None


_G2_PARTS = ("offload_hit", "noise_floor")


def resolve_max_model_len(
    needed: int | None, model_limit: int | None, configured: int | None
) -> int | None:
    """The --max-model-len a server of this run gets, or ValueError saying why none fits.

    A configured value is kept when it fits both the workload and the model; otherwise the
    workload's need plus slack, capped by the model's max_position_embeddings (vLLM refuses a
    longer one), so the KV cache is not sized for a context nobody sends.
    """
    if needed is not None and model_limit is not None and needed > model_limit:
        raise ValueError(
            f"the workload needs {needed} tokens of context (prompt + output) but the model's "
            f"max_position_embeddings is {model_limit}: shorten the workload"
        )
    if configured is not None:
        if model_limit is not None and configured > model_limit:
            raise ValueError(
                f"max_model_len {configured} is longer than the model's "
                f"max_position_embeddings {model_limit}"
            )
        if needed is not None and configured < needed:
            raise ValueError(
                f"max_model_len {configured} is shorter than the workload's longest request "
                f"({needed} tokens of prompt + output)"
            )
        return configured
    if needed is None:
        return model_limit
    padded = needed + CONTEXT_SLACK_TOKENS
    return min(padded, model_limit) if model_limit is not None else padded


def cold_recovery_flush_prompts(workload: dict[str, Any], kv_cache_tokens: int) -> int:
    """How many unrelated prompts of the workload's prompt size push every session out of a
    GPU KV cache of `kv_cache_tokens` tokens."""
    size = max(1, workload_prompt_tokens(workload))
    return max(1, math.ceil(kv_cache_tokens * COLD_RECOVERY_FLUSH_RATIO / size))
