"""`manage.py workload characterize`: JSON over the Mooncake fixture, a short text summary, a
load-shape-only trace flagged, and a bad trace refused with its line and field on stderr."""

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
MOONCAKE = PROJECT / "tests" / "fixtures" / "traces" / "mooncake-synthetic_trace.jsonl"


def workload(*args: str) -> str:
    out = StringIO()
    call_command("workload", "characterize", *args, stdout=out)
    return out.getvalue()


def test_json_over_the_mooncake_fixture_holds_the_promised_fields():
    data = json.loads(
        workload(str(MOONCAKE), "--format", "mooncake", "--capacity-tokens", "3000000", "--json")
    )
    assert (data["requests"], data["block_accesses"]) == (3993, 121_877)
    assert data["infinite_cache_hit_ratio"] == pytest.approx(0.651, abs=0.0005)
    assert list(data["hit_ratio_at"]) == ["3000000"]
    assert 0 < data["hit_ratio_at"]["3000000"] < data["infinite_cache_hit_ratio"]
    assert data["block_tokens"] == 512 and data["prefix_information"] is True


def test_the_text_summary_names_the_ceiling_and_each_capacity():
    text = workload(str(MOONCAKE), "--format", "mooncake", "--capacity-tokens", "1000000")
    assert "3,993 requests" in text and "infinite-cache ceiling: 65.1%" in text
    assert "LRU    1,000,000 tokens:" in text


def test_a_load_shape_trace_is_flagged(tmp_path: Path):
    path = tmp_path / "burst.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens\n1,GPT-4,10,2\n2,GPT-4,12,3\n")
    data = json.loads(workload(str(path), "--format", "burstgpt", "--json"))
    assert data["notice"] == "load shape only, no prefix information"
    assert data["hit_ratio_at"] == {} and data["infinite_cache_hit_ratio"] is None
    assert "load shape only" in workload(str(path), "--format", "burstgpt")


def test_a_bad_trace_names_its_line_and_field(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
        '{"timestamp": 4, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
    )
    with pytest.raises(CommandError, match="line 2, field timestamp: goes backwards"):
        workload(str(path), "--format", "mooncake")


def test_from_the_shell_an_error_exits_non_zero_with_the_line_and_field_on_stderr(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [1]}\n')
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "workload",
            "characterize",
            str(path),
            "--format",
            "mooncake",
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env=os.environ | {"DJANGO_SETTINGS_MODULE": "config.settings"},
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "line 1, field hash_ids" in done.stderr and "ceil(1000/512) = 2" in done.stderr
