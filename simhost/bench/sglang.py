"""`simhost bench_serving`: the load client with `python -m sglang.bench_serving`'s flags, writing
its --output-file JSON lines (one line appended per run, keys as sglang 0.5 writes them).

The flags are translated into `simhost bench`'s (random, and generated-shared-prefix as
prefix_repetition); the run's vLLM-shaped result is rewritten in SGLang's keys. Argument
handling is pure; the rewrite reads and writes the result files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any, Dict, List

from simhost.bench.args import add_bench_arguments
from simhost.server.args import UsageError

# What simhost serves: the OpenAI routes (SGLang's native /generate is not emulated).
BACKENDS = ("sglang-oai", "vllm", "openai", "sglang")
DATASETS = ("random", "random-ids", "generated-shared-prefix")
PERCENTILES = "50,90,95,99"
STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")


def add_bench_serving_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="sglang-oai")
    parser.add_argument("--base-url")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--model")
    parser.add_argument("--served-model-name")
    parser.add_argument("--tokenizer")
    parser.add_argument("--dataset-name", choices=DATASETS, default="random")
    parser.add_argument("--num-prompts", type=int, default=1000)
    for name in ("random-input-len", "random-output-len", "gsp-num-groups"):
        parser.add_argument("--" + name, type=int)
    for name in ("gsp-prompts-per-group", "gsp-system-prompt-len", "gsp-question-len"):
        parser.add_argument("--" + name, type=int)
    parser.add_argument("--gsp-output-len", type=int)
    parser.add_argument("--random-range-ratio", type=float, default=0.0)
    parser.add_argument("--gsp-range-ratio", type=float, default=1.0)
    parser.add_argument("--request-rate", type=float, default=float("inf"))
    parser.add_argument("--max-concurrency", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--warmup-requests", type=int, default=1)
    parser.add_argument("--disable-ignore-eos", action="store_true")
    parser.add_argument("--disable-tqdm", action="store_true")
    parser.add_argument("--output-file", required=True, help="required here: no default name")
    parser.add_argument("--output-details", action="store_true")
    parser.add_argument("--cache-report", action="store_true", help="accepted; not reported")


def bench_namespace(args: argparse.Namespace) -> argparse.Namespace:
    """The `simhost bench` arguments these flags mean, saving a detailed vLLM-shaped result
    beside the output file (rewritten into it by write_sglang_result)."""
    if args.backend == "sglang":
        raise UsageError("--backend sglang: simhost serves the OpenAI routes; use sglang-oai")
    argv = _common(args) + (_shared_prefix(args) if _is_gsp(args) else _random(args))
    parser = argparse.ArgumentParser(prog="simhost bench_serving")
    add_bench_arguments(parser)
    return parser.parse_args(argv)


def _common(args: argparse.Namespace) -> List[str]:
    directory, name = os.path.split(os.path.abspath(args.output_file))
    argv = ["--backend", "openai", "--request-rate", str(args.request_rate)]
    for flag, value in (
        ("--base-url", args.base_url),
        ("--model", args.model),
        ("--served-model-name", args.served_model_name),
        ("--tokenizer", args.tokenizer),
        ("--max-concurrency", args.max_concurrency),
        ("--temperature", args.temperature),
    ):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--host", args.host, "--port", str(args.port), "--seed", str(args.seed)]
    argv += ["--num-warmups", str(max(0, args.warmup_requests))]
    argv += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", PERCENTILES]
    argv += ["--save-result", "--save-detailed", "--result-dir", directory]
    argv += ["--result-filename", _vllm_name(name), "--disable-tqdm"]
    return argv + ([] if args.disable_ignore_eos else ["--ignore-eos"])


def _random(args: argparse.Namespace) -> List[str]:
    if args.random_range_ratio not in (0.0, 1.0):
        raise UsageError("--random-range-ratio: simhost draws fixed lengths only (use 1)")
    argv = ["--dataset-name", "random", "--num-prompts", str(args.num_prompts)]
    for flag, value in (
        ("--random-input-len", args.random_input_len),
        ("--random-output-len", args.random_output_len),
    ):
        if value is not None:
            argv += [flag, str(value)]
    return argv


def _shared_prefix(args: argparse.Namespace) -> List[str]:
    """generated-shared-prefix: groups of prompts sharing a system prompt, as simhost's
    prefix_repetition (num_prefixes groups, prefix then suffix, all of one output length)."""
    if args.gsp_range_ratio != 1.0:
        raise UsageError("--gsp-range-ratio: simhost draws fixed lengths only (use 1)")
    groups = args.gsp_num_groups or 64
    per_group = args.gsp_prompts_per_group or 16
    return [
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-num-prefixes",
        str(groups),
        "--prefix-repetition-prefix-len",
        str(args.gsp_system_prompt_len or 2048),
        "--prefix-repetition-suffix-len",
        str(args.gsp_question_len or 128),
        "--prefix-repetition-output-len",
        str(args.gsp_output_len or 256),
        "--num-prompts",
        str(groups * per_group),
    ]


def _is_gsp(args: argparse.Namespace) -> bool:
    return bool(args.dataset_name == "generated-shared-prefix")


def _vllm_name(name: str) -> str:
    return ".{}.vllm.json".format(name)


def write_sglang_result(args: argparse.Namespace, namespace: argparse.Namespace) -> None:
    """Append the run, in SGLang's keys, to --output-file; the vLLM-shaped file is removed."""
    source = os.path.join(namespace.result_dir, namespace.result_filename)
    with open(source) as handle:
        run = json.load(handle)
    os.remove(source)
    line = sglang_line(run, args)
    with open(args.output_file, "a") as handle:
        handle.write(json.dumps(line) + "\n")  # an unlimited rate as Infinity, as SGLang's


def sglang_line(run: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    """One vLLM-shaped run as sglang.bench_serving writes it (details with --output-details)."""
    duration = run["duration"] or math.nan
    line: Dict[str, Any] = {
        "tag": None,
        "backend": args.backend,
        "dataset_name": args.dataset_name,
        "request_rate": args.request_rate,
        "max_concurrency": args.max_concurrency,
        "random_input_len": args.random_input_len,
        "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio,
        "server_info": None,
        "duration": run["duration"],
        "completed": run["completed"],
        "total_input_tokens": run["total_input_tokens"],
        "total_output_tokens": run["total_output_tokens"],
        "total_output_tokens_retokenized": run["total_output_tokens"],
        "request_throughput": run["request_throughput"],
        "input_throughput": run["total_input_tokens"] / duration,
        "output_throughput": run["output_throughput"],
        "total_throughput": run["total_token_throughput"],
    }
    for ours, theirs in (
        ("e2el", "e2e_latency"),
        ("ttft", "ttft"),
        ("tpot", "tpot"),
        ("itl", "itl"),
    ):
        for stat in STATS:
            key = "{}_{}_ms".format(stat, ours)
            if key in run:
                line["{}_{}_ms".format(stat, theirs)] = run[key]
    line["concurrency"] = sum(run.get("latencies") or []) / duration
    line["max_concurrent_requests"] = run.get("max_concurrent_requests")
    if args.output_details:
        for key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
            line[key] = run.get(key)
    return line
