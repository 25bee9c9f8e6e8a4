"""The collector keeps a soak's summary as it stores windows: re-judging reads the summary and
its points, never the windows, and decides what every stored window decides; a soak stored
before summaries is folded from its rows once."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gates.decisions import decide_gate
from gates.models import Run, Soak, SoakPoint
from gates.services.soak import ticks as soak_service
from gates.services.soak.verdict import soak_decide, soak_spec_in_force
from runners.soak import collector, timeline

T0 = 1.8e9


def window(seq: int, *, crashed: bool = False, throughput: float = 500.0) -> collector.Window:
    start = T0 + 10 * seq
    line = {
        "seq": seq,
        "start": start,
        "end": start + 10,
        "boot_id": "b",
        "agent_pid": 1,
        "crashed": crashed,
        "server_rss_bytes": 40 * 2**30 + seq * 2**20,
    }
    return collector.Window(line=line)


@pytest.fixture
def soak(engagement) -> Soak:
    gate = engagement.gates.get(kind="G4")
    run = Run.objects.create(gate=gate, spec=gate.current_spec, attempt=1, state=Run.State.RUNNING)
    return Soak.objects.create(run=run, run_dir="/tmp/x", agent_sha256="0" * 64, started=T0)


def every_window_decision(soak: Soak) -> dict:
    rows = soak.run.soak_samples.order_by("seq")
    windows = [
        timeline.engine_window(
            r.seq, r.window_start.timestamp(), r.window_end.timestamp(), r.metrics
        )
        for r in rows
    ]
    summary = soak.summary
    context = {
        "started_at": soak.started,
        "ended_at": windows[-1]["end"],
        "block": summary["block"],
        "memory_stride": summary["memory_stride"],
    }
    return decide_gate(soak_spec_in_force(soak), windows, context)


def engine_part(decision: dict) -> dict:
    """The engine's decision, without the collector's account of the soak added beside it."""
    return {key: value for key, value in decision.items() if key != "soak"}


def store(soak: Soak, windows: list[collector.Window]) -> None:
    soak_service._store_windows(soak, windows)
    soak.save()


@pytest.mark.django_db
def test_ticks_keep_a_summary_that_decides_what_every_window_decides(soak):
    for first in range(0, 90, 9):  # ten ticks of nine windows, a crash in the fifth
        store(soak, [window(seq, crashed=seq == 40) for seq in range(first, first + 9)])
    soak.refresh_from_db()
    assert soak.summary["windows"] == 90 and soak.summary["crashed"] == [40]
    assert SoakPoint.objects.filter(run=soak.run, series="memory_bytes").count() == 90
    with CaptureQueriesContext(connection) as queries:
        decided = soak_decide(soak)
    assert not [q for q in queries.captured_queries if "soaksample" in q["sql"].lower()]
    assert engine_part(decided) == every_window_decision(soak)
    crashes = next(row for row in decided["clauses"] if row["check"] == "crashes")
    assert crashes["crashed_windows"] == [40]


@pytest.mark.django_db
def test_a_soak_stored_before_summaries_is_folded_from_its_rows_once(soak):
    store(soak, [window(seq) for seq in range(30)])
    Soak.objects.filter(pk=soak.pk).update(summary=None)
    SoakPoint.objects.filter(run=soak.run).delete()
    soak.refresh_from_db()
    store(soak, [window(seq) for seq in range(30, 40)])
    soak.refresh_from_db()
    assert soak.summary["windows"] == 40 and soak.summary["last_seq"] == 39
    assert SoakPoint.objects.filter(run=soak.run, series="memory_bytes").count() == 40
    assert engine_part(soak_decide(soak)) == every_window_decision(soak)
