"""`manage.py kvplan`: the KV headroom planner on the command line (text or --json).

Thin: parses arguments, reads a config.json if given, and calls gates.planner; touches no database.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from gates.planner import GIB, PlannerError, PlanResult, plan, preset_names, request_from_dict

# Planner field -> the flag a user typed, so an error names what they can fix.
FLAGS = {
    "gpus": "--gpus",
    "gpu_mem_gib": "--gpu-mem-gib",
    "tensor_parallel_size": "--tp",
    "kv_dtype": "--kv-dtype",
    "weight_bytes": "--weight-gib",
    "weight_dtype": "--weight-dtype",
    "reserved_fraction": "--reserved-fraction",
    "concurrency": "--concurrency",
    "context_tokens": "--context",
    "reuse_ratio": "--reuse-ratio",
    "model": "--model",
}
USAGE_ERROR = 2
MAX_WEIGHT_GIB = 2**30


class Command(BaseCommand):
    help = "Does the KV cache fit in VRAM at this concurrency and context, and can offload pay?"
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--model", help=f"a preset: {', '.join(preset_names())}")
        source.add_argument("--config", help="a Hugging Face config.json file")
        parser.add_argument("--gpus", type=int, help="number of GPUs")
        parser.add_argument("--gpu-mem-gib", type=float, help="memory of each GPU, GiB")
        parser.add_argument("--concurrency", type=int, help="concurrent requests")
        parser.add_argument("--context", type=int, help="tokens per request (prompt + output)")
        parser.add_argument("--kv-dtype", default="bf16", help="bf16, fp16, fp8, ... (bf16)")
        parser.add_argument("--tp", type=int, help="tensor parallel size (default: all GPUs)")
        parser.add_argument("--weight-gib", type=float, help="weights, GiB (default: preset)")
        parser.add_argument("--weight-dtype", help="weight dtype for a preset's parameters")
        parser.add_argument("--reserved-fraction", type=float, help="VRAM kept back (0.1)")
        parser.add_argument("--reuse-ratio", type=float, default=0.0, help="prefix reuse, 0..1")
        parser.add_argument("--json", action="store_true", help="print the plan as JSON")
        parser.add_argument("--list-models", action="store_true", help="list presets and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list_models"]:
            self.stdout.write("\n".join(preset_names()))
            return
        try:
            result = plan(request_from_dict(_request_data(options)))
        except PlannerError as error:
            flag = FLAGS.get(error.field.split(".")[0], "--config")
            raise CommandError(
                f"{flag} ({error.field}): {error.message}", returncode=USAGE_ERROR
            ) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=2))
        else:
            self.stdout.write(render_plan(result))


def _request_data(options: dict[str, Any]) -> dict[str, Any]:
    if not options["model"] and not options["config"]:
        raise CommandError("give --model NAME or --config FILE", returncode=USAGE_ERROR)
    for name in ("gpus", "gpu_mem_gib", "concurrency", "context"):
        if options[name] is None:
            flag = "--" + name.replace("_", "-")
            raise CommandError(f"{flag} is required", returncode=USAGE_ERROR)
    data = {
        "model": options["model"],
        "config": _read_config(options["config"]) if options["config"] else None,
        "gpus": options["gpus"],
        "gpu_mem_gib": options["gpu_mem_gib"],
        "tensor_parallel_size": options["tp"],
        "kv_dtype": options["kv_dtype"],
        "weight_dtype": options["weight_dtype"],
        "reserved_fraction": options["reserved_fraction"],
        "concurrency": options["concurrency"],
        "context_tokens": options["context"],
        "reuse_ratio": options["reuse_ratio"],
    }
    if options["weight_gib"] is not None:
        data["weight_bytes"] = _weight_bytes(options["weight_gib"])
    return {name: value for name, value in data.items() if value is not None}


def _weight_bytes(gib: float) -> int:
    if not 0 <= gib <= MAX_WEIGHT_GIB:
        raise CommandError(
            f"--weight-gib: must be 0 to {MAX_WEIGHT_GIB:,} GiB", returncode=USAGE_ERROR
        )
    return round(gib * GIB)


def _read_config(path: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(
            f"--config: cannot read {path}: {error}", returncode=USAGE_ERROR
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CommandError(
            f"--config: {path} is not valid JSON: {error}", returncode=USAGE_ERROR
        ) from None


def render_plan(result: PlanResult) -> str:
    """The plan as aligned text lines for a terminal."""
    gpus, boundary = result.gpus, result.boundary
    max_context = boundary.max_context_at_concurrency
    rows = [
        ("Model", f"{result.model}, KV in {result.kv_dtype}"),
        ("GPUs", f"{gpus}: {result.replicas} x tensor parallel {result.tensor_parallel_size}"),
        ("KV per token", f"{result.kv_bytes_per_token:,} bytes"),
        ("  per GPU", f"{result.kv_bytes_per_token_per_gpu:,} bytes"),
        ("Weights per GPU", _gib(result.weight_bytes_per_gpu)),
        ("KV capacity", f"{_gib(result.kv_capacity_per_gpu_bytes)} per GPU"),
        ("KV demand", f"{_gib(result.kv_demand_per_gpu_bytes)} per GPU"),
        ("Fits", "yes" if result.fits else "no"),
        ("Headroom", f"{_gib(result.headroom_bytes // gpus)} per GPU"),
        ("Max concurrency", f"{boundary.max_concurrency_at_context:,} at this context"),
        ("Max context", "any" if max_context is None else f"{max_context:,} tokens at this load"),
        ("Offload needed", _gib(result.offload_capacity_needed_bytes)),
        ("Prefill reused", f"{result.prefill_saving_share:.0%}"),
        ("  only offload", f"{result.offload_saving_share:.0%}"),
        ("Recommendation", result.recommendation),
    ]
    lines = [f"{label:<16} {value}" for label, value in rows]
    lines += [f"  - {reason}" for reason in (*result.reasons, *result.notes)]
    return "\n".join(lines)


def _gib(value: int) -> str:
    return f"{value / GIB:,.1f} GiB"
