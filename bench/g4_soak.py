"""G4 soak at scale, three figures in one run (docs/soak.md "Scale"):

1. re-judging a full 72 h soak at 10 s windows (25,920 stored windows) from its summary and
   points, against deciding from every stored window as before, side by side (and that both
   decide the same), with peak Python memory (tracemalloc), next to a tenth of it (2,592);
2. one collector tick's recording (one new window stored and folded into the summary, gaps
   checked, no re-judging due), and the same tick when a crash forces re-judging, after 10
   windows and at the end of that soak, side by side;
3. the host side of a tick (soak-read, agent status) against one loopback sshd serving many
   agent data directories, run back to back as one worker process does, first with a fresh SSH
   connection per tick (as before), then with the process's kept connection (the pool), side
   by side: ticks per second, hence how many soaks ticking every 30 s one worker holds.

Targets: decision < 2 s, tick < 100 ms. Runs on a throwaway SQLite database (or DATABASE_URL
with --postgres), the real services, a real sshd.

    .venv/bin/python bench/g4_soak.py [--postgres] [--soaks 200] [--ticks 400]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.soak_common import (  # noqa: E402
    BENCH_FILE,
    METRICS_FILE,
    T0,
    WINDOW_S,
    append_window,
    configure,
    soak_dir,
    window_line,
)


def sample_metrics(seq: int) -> dict:
    wobble = 1 + 0.02 * ((seq * 7919) % 13 - 6) / 6
    return {
        "crashed": False,
        "completed": 300,
        "failed": 0,
        "output_throughput": 500 * wobble,
        "ttft_p99_ms": 2000 / wobble,
        "memory_bytes": 40e9 + seq * 1000,
        "external_hit_rate": 0.6,
        "notes": [],
    }


def g4_run_with_windows(organization, label: str, count: int, metrics_of):
    """A running G4 run of a new engagement whose spec has WINDOW_S windows, with `count`
    windows stored from T0 on, window i's metrics being metrics_of(i) (bench/soak_page.py
    seeds its page from it too)."""
    from datetime import UTC, datetime

    from gates import services
    from gates.models import Run, SoakSample
    from gates.specs import validation as specs

    engagement = services.engagement_create(
        actor=services.Actor.system("bench"), organization=organization, title=label, model_name="m"
    )
    gate = engagement.gates.get(kind="G4")
    document = specs.default_spec("G4")
    document["window_min"] = WINDOW_S / 60
    services.gate_spec_update(actor=services.Actor.system("bench"), gate=gate, document=document)
    gate.refresh_from_db()
    run = Run.objects.create(
        gate=gate,
        spec=gate.current_spec,
        attempt=1,
        state=Run.State.RUNNING,
        started_at=datetime.now(tz=UTC),
    )
    when = lambda s: datetime.fromtimestamp(s, tz=UTC)  # noqa: E731
    SoakSample.objects.bulk_create(
        (
            SoakSample.of_window(
                run=run,
                seq=i,
                window_start=when(T0 + i * WINDOW_S),
                window_end=when(T0 + (i + 1) * WINDOW_S),
                metrics=metrics_of(i),
            )
            for i in range(count)
        ),
        batch_size=2000,
    )
    return run


def make_soak(count: int, label: str):
    """A G4 run on a soak with `count` stored windows, through the models directly; its
    summary folded from the rows once, as for a soak stored before summaries (timed)."""
    from gates.models import Organization, Soak
    from gates.services.soak.verdict import soak_summary_fold

    org = Organization.objects.create(name=f"bench {label}", slug=label, kind="customer")
    run = g4_run_with_windows(org, label, count, sample_metrics)
    soak = Soak.objects.create(
        run=run,
        run_dir="/tmp/bench-soak",
        agent_sha256="0" * 64,
        started=T0,
        deadline=T0 + 72 * 3600,
        last_seq=count - 1,
        offset=count * 400,
    )
    began = time.perf_counter()
    soak_summary_fold(soak, [])
    soak.save(update_fields=["summary"])
    soak.fold_s = time.perf_counter() - began
    return soak


def _engine_windows(soak) -> list[dict]:
    from runners.soak import timeline

    rows = soak.run.soak_samples.values_list("seq", "window_start", "window_end", "metrics")
    return [timeline.engine_window(q, a.timestamp(), b.timestamp(), m) for q, a, b, m in rows]


def measure_decision(counts: list[int]) -> None:
    from gates.decisions import decide_gate
    from gates.models import Soak
    from gates.services.soak.verdict import soak_decide, soak_spec_in_force

    print("1. re-judging a soak: from its summary (now) against from every stored window (before)")
    for count in counts:
        made = make_soak(count, f"decision-{count}")
        soak = Soak.objects.select_related("run__spec").get(pk=made.pk)
        # Timed without tracemalloc (it slows Python code several times), then measured with it.
        now, before = [], []
        for _ in range(3):
            began = time.perf_counter()
            result = soak_decide(soak)
            now.append(time.perf_counter() - began)
            began = time.perf_counter()
            summary = soak.summary
            context = {
                "started_at": T0,
                "block": summary["block"],
                "memory_stride": summary["memory_stride"],
            }
            full = decide_gate(soak_spec_in_force(soak), _engine_windows(soak), context)
            before.append(time.perf_counter() - began)
        same = {k: v for k, v in result.items() if k != "soak"} == full
        tracemalloc.start()
        soak_decide(soak)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"   {count:>6} windows: summary {1000 * min(now):7.1f} ms, every window "
            f"{1000 * min(before):7.1f} ms ({min(before) / min(now):5.1f}x), peak "
            f"{peak / 2**20:5.1f} MiB; same decision: {same}; verdict {result['verdict']}; "
            f"folding the stored rows once: {made.fold_s:.2f} s"
        )


def fake_window(seq: int, *, crashed: bool):
    from runners.soak import collector

    files = {
        "bench.json": BENCH_FILE.read_bytes(),
        "metrics-before.txt": METRICS_FILE.read_bytes(),
        "metrics-after.txt": METRICS_FILE.read_bytes(),
    }
    return collector.Window(window_line(seq, crashed=crashed), files)


def measure_ticks(counts: list[int]) -> None:
    print("2. one tick's recording, early in a soak and at the end of a 72 h one, side by side")
    for count in counts:
        measure_tick(count)


def measure_tick(count: int, repeats: int = 20) -> None:
    from django.conf import settings

    from gates.services.soak import ticks as soak_service
    from runners.soak import collector

    settings.TOLLGATE_SOAK_PROVISIONAL_S = 10**9
    soak = make_soak(count, f"tick-{count}")
    soak.provisional = {"verdict": "inconclusive", "computed_at": T0 + count * WINDOW_S}
    soak.save()
    tick = soak_service.SoakTick(
        run_id=soak.run_id,
        token="t",
        plan=None,
        host=collector.TickState(
            paths=collector.SoakPaths(soak.run_dir),
            python="python3",
            token="t",
            generation=1,
            offset=soak.offset,
            ack_seq=soak.last_seq,
            stop=False,
            deadline=None,
            cancel=False,
            may_relaunch=True,
            config={},
        ),
    )
    for crashed in (False, True):
        times = []
        for i in range(repeats):
            seq = count + i + (repeats if crashed else 0)
            read = collector.Read(
                now=T0 + (seq + 1) * WINDOW_S,
                heartbeat=T0 + (seq + 1) * WINDOW_S,
                exit=None,
                boot_id="b",
                started=T0,
                deadline=T0 + 72 * 3600,
                offset=soak.offset + (i + 1) * 400,
                windows=[fake_window(seq, crashed=crashed and i == 0)],
            )
            outcome = collector.TickOutcome(read, agent_running=True)
            began = time.perf_counter()
            soak_service.soak_tick_record(tick, outcome)
            times.append(time.perf_counter() - began)
        times.sort()
        what = "a crash: re-judged at once" if crashed else "a quiet window"
        print(
            f"   after {count:>6} windows, {what:<28} "
            f"median {1000 * times[len(times) // 2]:7.1f} ms, max {1000 * times[-1]:7.1f} ms"
        )


def measure_host_side(soaks: int, ticks: int, workdir: Path) -> None:
    from runners.soak import collector
    from runners.soak import host as soak_host
    from runners.transport import open_transport
    from runners.transport.pool import ConnectionPool
    from tests.sshd import loopback_sshd

    dirs = []
    for i in range(soaks):
        run_dir = workdir / f"run-{i}"
        soak_dir(run_dir)
        for seq in range(3):
            append_window(run_dir, window_line(seq))
        dirs.append(collector.SoakPaths(str(run_dir)))
    print(f"3. host side of a tick: {soaks} soak directories behind one loopback sshd")
    (workdir / "sshd").mkdir()
    with loopback_sshd(workdir / "sshd") as server:
        target = server.target()
        pool = ConnectionPool()
        modes = {
            "fresh connection per tick (before)": lambda: open_transport(target),
            "kept connection (runners/transport/pool.py)": lambda: pool.lend(target),
        }
        rates = {}
        for label, connection in modes.items():
            began = time.perf_counter()
            for i in range(ticks):
                with connection() as transport:
                    host_side_tick(soak_host, transport, dirs[i % soaks])
            rates[label] = ticks / (time.perf_counter() - began)
            print(
                f"   {label}: {ticks} ticks, {1000 / rates[label]:.0f} ms per tick, "
                f"{rates[label]:.1f} ticks/s: one worker process holds about "
                f"{int(rates[label] * 30)} soaks ticking every 30 s"
            )
        pool.close_all()
    before, after = rates.values()
    print(
        f"   kept vs fresh: {after / before:.1f}x the ticks per second, {pool.opened} "
        f"connection(s) opened for {ticks} ticks (each read carries 3 windows with raw files)"
    )


def host_side_tick(soak_host, transport, paths) -> None:
    """A tick's host side: the read (a window per tick is typical; the worst case at 30 s
    ticks of 10 s windows is three, what each read carries here) and the agent's status."""
    soak_host.read(
        transport,
        paths=paths,
        python=sys.executable,
        offset=0,
        ack_seq=-1,
        stop=False,
        deadline=None,
    )
    soak_host.agent_status(transport, paths=paths, generation=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="use DATABASE_URL")
    parser.add_argument("--soaks", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=400)
    parser.add_argument("--host-side-only", action="store_true", help="only figure 3")
    parser.add_argument(
        "--windows", type=int, default=25920, help="stored windows of the largest soak decided"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tollgate-bench-") as scratch:
        configure(scratch, args.postgres)
        if not args.host_side_only:
            measure_decision([args.windows // 10, args.windows])
            measure_ticks([10, args.windows])
        measure_host_side(args.soaks, args.ticks, Path(scratch) / "hosts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
