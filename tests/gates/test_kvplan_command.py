"""`manage.py kvplan`: JSON and text output, and bad input refused with the flag named, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

PROJECT = Path(__file__).resolve().parents[2]
LOAD = ["--gpus", "8", "--gpu-mem-gib", "80", "--concurrency", "64", "--context", "32000"]
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "kv_lora_rank": 512,
    "num_attention_heads": 128,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "qk_rope_head_dim": 64,
}


def kvplan(*args: str) -> str:
    out = StringIO()
    call_command("kvplan", *args, stdout=out)
    return out.getvalue()


def kvplan_json(*args: str) -> dict:
    return json.loads(kvplan(*args, "--json"))


def test_json_output_carries_the_promised_fields() -> None:
    data = kvplan_json("--model", "llama-3.1-70b", *LOAD, "--reuse-ratio", "0.8")
    assert data["kv_bytes_per_token"] == 327_680
    assert data["kv_demand_bytes"] == 8 * 64 * 32_000 * 40_960
    assert data["kv_capacity_bytes"] == 8 * 59_670_984_704
    assert data["fits"] is False
    assert data["recommendation"] == "offload_worth_testing"


def test_fp8_kv_halves_bytes_per_token() -> None:
    data = kvplan_json("--model", "llama-3.1-70b", *LOAD, "--kv-dtype", "fp8")
    assert data["kv_bytes_per_token"] == 163_840


def test_text_output_reads_as_a_summary_with_reasons() -> None:
    text = kvplan("--model", "llama-3.1-8b", *LOAD[:-4], "--concurrency", "4", "--context", "8192")
    assert "Recommendation   keep_resident" in text
    assert "KV per token     131,072 bytes" in text
    assert "  - " in text


def test_a_config_json_file_with_its_weight_size(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DEEPSEEK_V3))
    args = ["--config", str(config), *LOAD, "--gpu-mem-gib", "141", "--weight-gib", "640"]
    data = kvplan_json(*args)
    assert data["kv_bytes_per_token"] == 61 * 576 * 2
    assert data["kv_bytes_per_token_per_gpu"] == 70_272


def test_list_models_prints_the_presets() -> None:
    assert "deepseek-v3" in kvplan("--list-models").split()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--model", "llama-3.1-70b", *LOAD, "--gpus", "0"], "--gpus (gpus)"),
        (["--model", "llama-3.1-70b", *LOAD, "--context", "-5"], "--context (context_tokens)"),
        (["--model", "llama-3.1-70b", *LOAD, "--kv-dtype", "int3"], "--kv-dtype (kv_dtype)"),
        (["--model", "llama-3.1-70b", *LOAD, "--tp", "3"], "--tp (tensor_parallel_size)"),
        (["--model", "nope", *LOAD], "--model (model)"),
        (["--model", "llama-3.1-70b", *LOAD, "--weight-gib", "inf"], "--weight-gib"),
        (["--model", "llama-3.1-70b", "--gpus", "8"], "--gpu-mem-gib is required"),
        (LOAD, "give --model NAME or --config FILE"),
        (["--config", "/nonexistent/config.json", *LOAD], "--config: cannot read"),
    ],
)
def test_bad_input_is_refused_with_the_flag_named(args: list[str], named: str) -> None:
    with pytest.raises(CommandError) as caught:
        kvplan(*args)
    assert named in str(caught.value)
    assert caught.value.returncode == 2


def test_a_malformed_config_file_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "config.json"
    broken.write_text('{"num_hidden_layers": 4,')
    with pytest.raises(CommandError) as caught:
        kvplan("--config", str(broken), *LOAD)
    assert f"{broken} is not valid JSON" in str(caught.value)
    missing = tmp_path / "partial.json"
    missing.write_text('{"num_hidden_layers": 4}')
    with pytest.raises(CommandError) as caught:
        kvplan("--config", str(missing), *LOAD)
    assert "(config.num_attention_heads)" in str(caught.value)


def test_the_real_command_line_exits_2_with_one_line_on_stderr() -> None:
    argv = [sys.executable, "manage.py", "kvplan", "--model", "llama-3.1-70b", *LOAD]
    done = subprocess.run(
        [*argv, "--gpus", "0"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "CommandError: --gpus (gpus): must be at least 1"
    assert done.stdout == ""
