"""SoakSample's page columns: the collector writes them from the same metrics it stores as JSON
(numbers as floats, anything else as NULL, crashed only when true), and migration 0013's
backfill fills rows stored before the columns existed with the same values, on PostgreSQL and
on SQLite."""

from __future__ import annotations

import importlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.db import connection

from gates.models import Run, Soak, SoakSample
from gates.models.soak import SOAK_SAMPLE_NUMBERS, soak_sample_columns
from gates.services.soak import ticks as soak_service
from runners.soak import collector

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BENCH = FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json"
IDLE = FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_idle.txt"
LOADED = FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_loaded_128conc.txt"
SMI = FIXTURES / "nvidia-smi/nvidia_gpu_exporter__capture__linux-x86_64__nvidia-h200__590.48.01.txt"
T0 = 1.8e9
BACKFILL = importlib.import_module("gates.migrations.0013_soak_sample_columns")


def expected_columns(metrics: dict) -> dict:
    """What the columns must hold, read straight off the JSON."""
    numbers = {
        name: float(value) if type(value) in (int, float) else None
        for name, value in ((name, metrics.get(name)) for name in SOAK_SAMPLE_NUMBERS)
    }
    return {**numbers, "crashed": metrics.get("crashed") is True}


def stored_columns(sample: SoakSample) -> dict:
    return {name: getattr(sample, name) for name in (*SOAK_SAMPLE_NUMBERS, "crashed")}


def window_line(seq: int, **extra) -> dict:
    start = T0 + 10 * seq
    line = {"seq": seq, "start": start, "end": start + 10, "boot_id": "b", "agent_pid": 1}
    return {**line, "server_rss_bytes": 41 * 2**30, "host_available_bytes": 400 * 2**30, **extra}


@pytest.fixture
def soak(engagement) -> Soak:
    gate = engagement.gates.get(kind="G4")
    run = Run.objects.create(gate=gate, spec=gate.current_spec, attempt=1, state=Run.State.RUNNING)
    return Soak.objects.create(run=run, run_dir="/tmp/x", agent_sha256="0" * 64, started=T0)


def test_stored_windows_carry_their_metrics_numbers_as_columns(soak):
    files = {
        "bench.json": BENCH.read_bytes(),
        "metrics-before.txt": IDLE.read_bytes(),
        "metrics-after.txt": LOADED.read_bytes(),
        "smi.txt": SMI.read_bytes(),
    }
    windows = [
        collector.Window(line=window_line(0), files=files),
        collector.Window(line=window_line(1)),  # the bench left nothing: most metrics are None
        collector.Window(line=window_line(2, crashed=True, crash="server exited 137")),
    ]
    assert len(soak_service._store_windows(soak, windows)) == 3
    full, empty, crashed = SoakSample.objects.filter(run=soak.run).order_by("seq")
    for sample in (full, empty, crashed):
        assert stored_columns(sample) == expected_columns(sample.metrics)
    # The fixtures fill the bench's and /metrics' numbers, so the comparison was not vacuous.
    filled = ("completed", "output_throughput", "ttft_p99_ms", "kv_cache_usage", "memory_bytes")
    assert all(getattr(full, name) is not None for name in filled)
    assert full.failed == 0.0  # a zero is a number, not a missing value
    assert full.output_throughput == full.metrics["output_throughput"] > 0
    assert empty.output_throughput is None and empty.metrics["output_throughput"] is None
    assert empty.memory_bytes == 41 * 2**30 and not empty.crashed
    assert crashed.crashed and crashed.metrics["crashed"] is True


def test_only_numbers_become_column_values():
    metrics = {
        "crashed": 1,  # truthy but not true: the page never counted it as a crash
        "completed": 300,
        "failed": None,
        "output_throughput": "fast",
        "ttft_p50_ms": True,
        "kv_cache_usage": 0.25,
    }
    columns = soak_sample_columns(metrics)
    assert columns == expected_columns(metrics)
    assert columns["completed"] == 300.0 and isinstance(columns["completed"], float)
    assert columns["kv_cache_usage"] == 0.25 and columns["crashed"] is False
    assert columns["failed"] is columns["output_throughput"] is columns["ttft_p50_ms"] is None
    assert columns["gpu_memory_used_mib"] is None  # missing from the metrics altogether


OLD_ROWS = [
    {
        **json.loads(json.dumps(collector.window_sample(collector.Window(line=window_line(0))))),
        "failed": 2,
    },
    {"crashed": True, "completed": 10, "output_throughput": 123.5, "memory_bytes": 4e10},
    {"crashed": False, "output_throughput": "n/a", "ttft_p99_ms": None, "kv_cache_usage": 0.5},
    {},
]


def test_the_backfill_fills_rows_stored_before_the_columns(soak):
    when = lambda s: datetime.fromtimestamp(s, tz=UTC)  # noqa: E731
    SoakSample.objects.bulk_create(
        SoakSample(run=soak.run, seq=seq, window_start=when(T0), window_end=when(T0), metrics=m)
        for seq, m in enumerate(OLD_ROWS)
    )
    before = SoakSample.objects.filter(run=soak.run).order_by("seq")
    assert all(sample.output_throughput is None and not sample.crashed for sample in before)
    with connection.schema_editor() as editor:
        BACKFILL.backfill_columns(django_apps, editor)
    after = SoakSample.objects.filter(run=soak.run).order_by("seq")
    assert [stored_columns(sample) for sample in after] == [expected_columns(m) for m in OLD_ROWS]
    assert after[1].crashed and after[1].output_throughput == 123.5


def test_the_backfill_statement_for_sqlite_reads_the_same_values():
    """The SQLite database (the fallback when DATABASE_URL is unset) gets its own statement."""
    names = ", ".join(f"{name} REAL" for name in SOAK_SAMPLE_NUMBERS)
    with sqlite3.connect(":memory:") as db:
        db.execute(
            f"CREATE TABLE gates_soaksample (seq INTEGER, metrics TEXT, crashed BOOL, {names})"
        )
        db.executemany(
            "INSERT INTO gates_soaksample (seq, metrics, crashed) VALUES (?, ?, 0)",
            [(seq, json.dumps(metrics)) for seq, metrics in enumerate(OLD_ROWS)],
        )
        db.execute(BACKFILL._sqlite_update())
        rows = db.execute(
            f"SELECT crashed, {', '.join(SOAK_SAMPLE_NUMBERS)} FROM gates_soaksample ORDER BY seq"
        ).fetchall()
    filled = [
        {"crashed": bool(row[0]), **dict(zip(SOAK_SAMPLE_NUMBERS, row[1:], strict=True))}
        for row in rows
    ]
    assert filled == [expected_columns(metrics) for metrics in OLD_ROWS]
