"""What a spec's workload means on the host, shared by the gate programs and the KV planner.
Pure: plain dicts in, numbers out; imports nothing from Django or gates.
"""

from __future__ import annotations

# vllm bench's own default for --prefix-repetition-num-prefixes.
VLLM_BENCH_NUM_PREFIXES = 10


def workload_num_prefixes(workload: dict) -> int:
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


# The workload fields each dataset's bench command reads (the built-in profiles' templates).
DATASET_FIELDS = {"random": ("input_len", "output_len")} | dict.fromkeys(
    ("prefix_repetition", "cold_recovery"), ("prefix_len", "suffix_len", "output_len")
)
