"""`python -m runners.adapters FILE [--tool NAME]`: JSON out, or exit 2 with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
FIXTURES = ROOT / "tests/fixtures"


def _run(*arguments: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runners.adapters", *arguments],
        cwd=ROOT,
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_prints_the_normalized_json_of_a_file():
    result = _run(str(FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"][0]["completed"] == 8
    assert result.stderr == ""


def test_it_reads_standard_input_when_the_file_is_a_dash():
    text = (FIXTURES / "uname/debian12-firecracker-vm__uname_r.txt").read_bytes()
    result = _run("-", "--tool", "uname", stdin=text)
    assert json.loads(result.stdout) == {"tool": "uname", "kernel_release": "6.18.44-fc-v857"}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (
            [
                "vllm-bench/zhangxinyuehfad__serving_llama8B_tp1_sharegpt_qps_1__2025-02_ascend_pipeline.json"
            ],
            "no `duration` and no `completed`",
        ),
        (["nvidia-smi/telegraf__a10g.xml", "--tool", "vllm-bench"], "not valid JSON"),
        (["nvidia-smi/telegraf__a10g.xml", "--tool", "nvidia"], "unknown tool 'nvidia'"),
        (["vllm-bench/missing.json"], "cannot read the file (No such file or directory)"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_file_and_no_traceback(arguments, problem):
    path = str(FIXTURES / arguments[0])
    result = _run(path, *arguments[1:])
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"{path}: ")
    assert problem in result.stderr
    assert "Traceback" not in result.stderr


def test_binary_input_exits_2_with_one_line(tmp_path):
    path = tmp_path / "core.bin"
    path.write_bytes(bytes(range(256)) * 4)
    result = _run(str(path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "not UTF-8 text" in result.stderr


def test_a_usage_error_is_one_line_too():
    result = _run()
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "the following arguments are required: file" in result.stderr


def test_importing_the_adapters_loads_no_django():
    code = "import sys, runners.adapters; print(any(m.startswith('django') for m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "False", result.stderr
