"""The collector's record of a tick whose window shows the host unfit
(gates/services/soak/ticks.py):
the health check comes before any verdict, so a window that crashed BECAUSE a GPU fell off the
bus ends the run infra_error, where the same crash alone stops the soak early as a product fail.
Real PostgreSQL; the host's reply is built from simhost's output."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from gates.models import Run, Soak, SoakSample
from gates.services.soak import ticks as soak_service
from runners.soak import collector
from simhost.host.kernellog import render_kernel_log
from tests.gates.soak.test_soak_sample_columns import soak, window_line  # noqa: F401 (fixture)
from tests.runners.soak.test_soak_health import host, smi

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Tick:
    run_id: int


def reply(*windows: collector.Window) -> collector.TickOutcome:
    now = time.time()
    read = collector.Read(now, now, None, "b", 1.8e9, 1.8e9 + 3600, 1000, list(windows))
    return collector.TickOutcome(read, agent_running=True)


def crashed_window(seq: int, **files: bytes) -> collector.Window:
    line = window_line(seq, crashed=True, crash={"exit_code": -9, "log_tail": ["CUDA error"]})
    return collector.Window(line, files={"smi.txt": smi(), **files}, text=json.dumps(line))


def fallen_off_the_bus() -> bytes:
    fault = host(xid_events=[{"gpu": 3, "code": 79}])
    return render_kernel_log(fault, datetime.now(UTC)).encode()


def test_a_window_that_crashed_with_an_xid_ends_the_run_infra_error_not_fail(soak):  # noqa: F811
    clean = collector.Window(window_line(0), files={"smi.txt": smi(), "kernel-log.txt": b""})
    said = soak_service.soak_tick_record(
        Tick(soak.run_id),
        reply(clean, crashed_window(1, **{"kernel-log.txt": fallen_off_the_bus()})),
    )
    run = Run.objects.get(pk=soak.run_id)
    assert (run.state, run.outcome) == ("finished", "infra_error"), said
    assert run.reason.startswith("the host became unfit to measure in window 1: GPU 3: XID 79")
    assert not run.decisions.exists()
    soak = Soak.objects.get(pk=soak.pk)
    assert soak.state == Soak.State.ENDED and not soak.stop_reason
    assert soak.provisional is None  # never judged: no verdict counted the crash
    assert list(SoakSample.objects.filter(run=run).values_list("seq", flat=True)) == [0, 1]


def test_the_same_crash_without_a_host_fault_stops_the_soak_early_as_the_products(soak):  # noqa: F811
    clean = collector.Window(window_line(0), files={"smi.txt": smi(), "kernel-log.txt": b""})
    said = soak_service.soak_tick_record(
        Tick(soak.run_id), reply(clean, crashed_window(1, **{"kernel-log.txt": b""}))
    )
    soak = Soak.objects.get(pk=soak.pk)
    assert soak.state == Soak.State.STOPPING, said
    assert soak.stop_reason.startswith("early stop: crashes")
    assert soak.health["windows"] == 2 and "fault" not in soak.health
