"""What a quiet soak tick costs the database, held: the claim, the recording of three 10 s
windows with their raw files (a steady 30 s tick) and the release, counted in SQL queries, so
that a re-read or a query per window creeps back in as a failing test (docs/soak.md "Scale").
Real PostgreSQL; the host's side is a stand-in (tests/runners/soak reads real agents)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gates.models import Artifact, Soak, SoakSample
from runners.soak import collector
from tests.gates.soak.test_soak_tick_claims import leased_due_soak
from worker import tasks

pytestmark = pytest.mark.django_db
T0 = 1.8e9
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RAW_FILES = {
    "bench.json": FIXTURES / "vllm-bench" / "er0080__bench_serve_v0.25.1__opt-125m_cpu.json",
    "metrics-before.txt": FIXTURES / "vllm-metrics" / "er0080__metrics_vllm_0.25.1_idle.txt",
    "metrics-after.txt": FIXTURES / "vllm-metrics" / "er0080__metrics_vllm_0.25.1_idle.txt",
}
# Claim 2 (the conditional UPDATE, the soak with its run and engagement), recording 9 (lock,
# lease, the previous window, samples, artifacts, points, the soak's UPDATE, the savepoint
# pair a test sees for the transaction), the ended check 1, release 1 (19 before 2026-12-04).
QUIET_TICK_QUERIES = 13


def raw_window(seq: int) -> collector.Window:
    start = T0 + 10 * seq
    line = {
        "seq": seq,
        "start": start,
        "end": start + 10,
        "boot_id": "b",
        "agent_pid": 1,
        "server_pid": 2,
        "crashed": False,
        "crash": None,
        "bench_exit": 0,
        "files": sorted(RAW_FILES),
        "server_rss_bytes": 40e9 + seq * 1000,
    }
    files = {name: path.read_bytes() for name, path in RAW_FILES.items()}
    return collector.Window(line, files, text=json.dumps(line))


@pytest.fixture
def due_soak(engagement, customer_org, settings, tmp_path) -> Soak:
    settings.TOLLGATE_SOAK_PROVISIONAL_S = 300
    return leased_due_soak(engagement, customer_org, tmp_path)


@pytest.fixture
def host_windows(monkeypatch) -> list[list[collector.Window]]:
    """Stands in for the host: each tick reads the next batch of windows queued here."""
    batches: list[list[collector.Window]] = []

    def read(transport, state, scratch):
        windows = batches.pop(0)
        end = windows[-1].line["end"] if windows else T0
        found = collector.Read(end, end, None, "b", T0, T0 + 3600, state.offset + 1, windows)
        return collector.TickOutcome(found, agent_running=True)

    monkeypatch.setattr(tasks.soak_host, "tick", read)
    return batches


def tick(soak: Soak) -> list[str]:
    Soak.objects.filter(pk=soak.pk).update(next_tick_at=timezone.now())
    with CaptureQueriesContext(connection) as queries:
        tasks.tick_soak(soak.run_id)
    return [query["sql"] for query in queries.captured_queries]


def test_a_quiet_tick_of_three_windows_costs_a_fixed_number_of_queries(due_soak, host_windows):
    host_windows += [[raw_window(seq) for seq in range(3)], [raw_window(seq) for seq in (3, 4, 5)]]
    tick(due_soak)  # the first: judged at once (no provisional verdict yet)
    quiet = tick(due_soak)
    assert len(quiet) <= QUIET_TICK_QUERIES, "\n".join(quiet)
    assert SoakSample.objects.filter(run=due_soak.run).count() == 6
    assert Artifact.objects.filter(run=due_soak.run).count() == 6 * 4  # raw files and line
    soak = Soak.objects.get(pk=due_soak.pk)
    assert soak.last_seq == 5 and soak.summary["windows"] == 6 and soak.gaps == []


def test_a_tick_costs_the_same_queries_however_many_windows_it_stores(due_soak, host_windows):
    host_windows += [
        [raw_window(0)],
        [raw_window(1)],
        [raw_window(seq) for seq in range(2, 8)],
    ]
    tick(due_soak)
    one, six = tick(due_soak), tick(due_soak)
    assert len(six) == len(one), "\n".join(six)
