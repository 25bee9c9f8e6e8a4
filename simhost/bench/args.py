"""`simhost bench` flags, spelled as `vllm bench serve` spells them, and their translation into
BenchSettings. Pure argument handling; imports argparse and simhost's pure modules.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Tuple

from simhost.datasets import DatasetSpec
from simhost.scenarios import SCENARIOS
from simhost.server.args import UsageError

if TYPE_CHECKING:  # imported where used: prometheus_client only when benchmarking
    from simhost.bench.client import Endpoint
    from simhost.bench.run import BenchSettings

DATASETS = ("random", "prefix_repetition", "cold_recovery")
BACKENDS = ("openai", "vllm", "openai-chat")
METRICS = ("ttft", "tpot", "itl", "e2el")

# dest -> built-in default; None-defaulted on the parser so a --scenario can fill them first
_DEFAULTS: Dict[str, Any] = {
    "dataset_name": "random",
    "num_prompts": 1000,
    "seed": 0,
    "random_input_len": 1024,
    "random_output_len": 128,
    "random_range_ratio": 0.0,
    "random_prefix_len": 0,
    "prefix_repetition_prefix_len": 256,
    "prefix_repetition_suffix_len": 256,
    "prefix_repetition_num_prefixes": 10,
    "prefix_repetition_output_len": 128,
    "max_concurrency": None,
    "temperature": None,
}


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="openai")
    parser.add_argument("--base-url")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--endpoint")
    parser.add_argument("--model")
    # The name the API serves (vllm bench: --model is then only the tokenizer's source).
    parser.add_argument("--served-model-name")
    parser.add_argument("--tokenizer")
    parser.add_argument("--dataset-name", choices=DATASETS)
    for name, kind in (
        ("num-prompts", int),
        ("seed", int),
        ("random-input-len", int),
        ("random-output-len", int),
        ("random-range-ratio", float),
        ("random-prefix-len", int),
        ("prefix-repetition-prefix-len", int),
        ("prefix-repetition-suffix-len", int),
        ("prefix-repetition-num-prefixes", int),
        ("prefix-repetition-output-len", int),
        ("max-concurrency", int),
        ("temperature", float),
    ):
        parser.add_argument("--" + name, type=kind)
    _add_bench_extras(parser)


def _add_bench_extras(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--disable-shuffle", action="store_true")
    parser.add_argument("--request-rate", type=float, default=float("inf"))
    parser.add_argument("--burstiness", type=float, default=1.0)
    parser.add_argument("--num-warmups", type=int, default=0)
    parser.add_argument("--ignore-eos", action="store_true")
    parser.add_argument("--extra-body", help="JSON object merged into every request body")
    parser.add_argument("--percentile-metrics", default="ttft,tpot,itl")
    parser.add_argument("--metric-percentiles", default="99")
    parser.add_argument("--label")
    parser.add_argument("--metadata", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--save-result", action="store_true")
    parser.add_argument("--save-detailed", action="store_true")
    parser.add_argument("--append-result", action="store_true")
    parser.add_argument("--result-dir")
    parser.add_argument("--result-filename")
    parser.add_argument("--ready-check-timeout-sec", type=float, default=0.0)
    parser.add_argument("--disable-tqdm", action="store_true", help="accepted; simhost has no bar")
    group = parser.add_argument_group("simhost only")
    group.add_argument("--scenario", choices=sorted(SCENARIOS), help="defaults from a scenario")
    group.add_argument("--cold-recovery-flush-tokens", type=int, help="default: ratio x server KV")
    group.add_argument("--cold-recovery-flush-ratio", type=float, default=1.2)
    group.add_argument("--request-timeout-sec", type=float, default=6 * 3600.0)


def _resolved(args: argparse.Namespace) -> Dict[str, Any]:
    values = dict(vars(args))
    scenario = SCENARIOS[args.scenario].bench if args.scenario else {}
    for dest, default in _DEFAULTS.items():
        if values.get(dest) is None:
            values[dest] = scenario.get(dest, default)
    return values


def _positive(values: Mapping[str, Any], names: List[str], allow_zero: bool = False) -> None:
    for name in names:
        value = values.get(name)
        if value is not None and (value < 0 or (value == 0 and not allow_zero)):
            raise UsageError(
                "--{}: must be {}".format(name.replace("_", "-"), ">= 0" if allow_zero else "> 0")
            )


def _dataset(values: Mapping[str, Any]) -> DatasetSpec:
    _positive(values, ["num_prompts", "random_input_len", "random_output_len"])
    _positive(values, ["prefix_repetition_prefix_len", "prefix_repetition_num_prefixes"])
    _positive(
        values, ["prefix_repetition_output_len", "max_concurrency", "cold_recovery_flush_ratio"]
    )
    _positive(values, ["random_prefix_len", "prefix_repetition_suffix_len"], allow_zero=True)
    if not 0 <= values["random_range_ratio"] < 1:
        raise UsageError("--random-range-ratio: must be in [0, 1)")
    return DatasetSpec(
        name=values["dataset_name"],
        num_prompts=values["num_prompts"],
        seed=values["seed"],
        random_input_len=values["random_input_len"],
        random_output_len=values["random_output_len"],
        random_range_ratio=values["random_range_ratio"],
        random_prefix_len=values["random_prefix_len"],
        prefix_len=values["prefix_repetition_prefix_len"],
        suffix_len=values["prefix_repetition_suffix_len"],
        num_prefixes=values["prefix_repetition_num_prefixes"],
        prefix_output_len=values["prefix_repetition_output_len"],
        disable_shuffle=values["disable_shuffle"],
        flush_tokens=values.get("cold_recovery_flush_tokens"),
    )


def _metric_lists(values: Mapping[str, Any]) -> Tuple[List[str], List[float]]:
    metrics = [m.strip() for m in values["percentile_metrics"].split(",") if m.strip()]
    for metric in metrics:
        if metric not in METRICS:
            raise UsageError("--percentile-metrics: unknown metric {!r}".format(metric))
    try:
        percentiles = [float(p) for p in values["metric_percentiles"].split(",") if p.strip()]
    except ValueError:
        raise UsageError("--metric-percentiles: must be numbers like 50,90,99") from None
    if any(not 0 < p <= 100 for p in percentiles):
        raise UsageError("--metric-percentiles: each must be in (0, 100]")
    return metrics, percentiles


def _key_values(pairs: List[str]) -> Dict[str, str]:
    result = {}
    for pair in pairs:
        if "=" not in pair:
            raise UsageError("--metadata: expected KEY=VALUE, got {!r}".format(pair))
        key, value = pair.split("=", 1)
        result[key] = value
    return result


def _extra_body(text: Any) -> Dict[str, Any]:
    if not text:
        return {}
    try:
        body = json.loads(text)
    except ValueError:
        raise UsageError("--extra-body: not valid JSON") from None
    if not isinstance(body, dict):
        raise UsageError("--extra-body: must be a JSON object")
    return body


def _endpoint(values: Mapping[str, Any]) -> Endpoint:
    from simhost.bench.client import Endpoint

    chat = values["backend"] == "openai-chat"
    base_url = values["base_url"] or "http://{}:{}".format(values["host"], values["port"])
    if not base_url.startswith(("http://", "https://")):
        raise UsageError("--base-url: must start with http:// or https://")
    return Endpoint(
        base_url=base_url,
        path=values["endpoint"] or ("/v1/chat/completions" if chat else "/v1/completions"),
        chat=chat,
        # None: the bench asks /v1/models, as vLLM's does
        model=values["served_model_name"] or values["model"],
        temperature=values["temperature"],
        ignore_eos=values["ignore_eos"] or values["dataset_name"] == "random",
        extra_body=_extra_body(values["extra_body"]),
    )


def bench_settings(args: argparse.Namespace) -> BenchSettings:
    """Validated BenchSettings; raises UsageError naming the flag."""
    from simhost.bench.run import BenchSettings  # prometheus_client only when benchmarking

    values = _resolved(args)
    metrics, percentiles = _metric_lists(values)
    if values["request_rate"] <= 0 or values["burstiness"] <= 0:
        raise UsageError("--request-rate and --burstiness: must be > 0")
    return BenchSettings(
        endpoint=_endpoint(values),
        backend=values["backend"],
        dataset=_dataset(values),
        max_concurrency=values["max_concurrency"],
        request_rate=values["request_rate"],
        burstiness=values["burstiness"],
        num_warmups=max(0, values["num_warmups"]),
        flush_ratio=values["cold_recovery_flush_ratio"],
        percentile_metrics=metrics,
        metric_percentiles=percentiles,
        label=values["label"],
        tokenizer_id=values["tokenizer"] or values["model"] or "",
        metadata=_key_values(values["metadata"]),
        ready_check_timeout_s=values["ready_check_timeout_sec"],
        request_timeout_s=values["request_timeout_sec"],
        save_result=values["save_result"],
        save_detailed=values["save_detailed"],
        append_result=values["append_result"],
        result_dir=values["result_dir"],
        result_filename=values["result_filename"],
    )
