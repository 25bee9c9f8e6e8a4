"""What retention frees (docs/soak.md "Retention"): a decided, sealed G4 soak of `--windows`
10 s windows (25,920: 72 h) whose every window keeps the raw files a real window keeps (two
/metrics scrapes, the bench result and log, nvidia-smi's XML, the kernel log, the window's
line; real captures from tests/fixtures), then the janitor's prune under the spec's policy
(`--every` N, the first and last, a crash and the decision's change points kept).

Prints the raw files stored before and after, as bytes handed to the database and, on
PostgreSQL, as stored (pg_column_size: after TOAST's compression), and how long pruning took.

    .venv/bin/python bench/soak_retention.py [--postgres] [--windows 25920] [--every 60]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.g4_soak import T0, WINDOW_S, configure, g4_run_with_windows  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
RAW = {
    "metrics-before.txt": FIXTURES / "vllm-metrics" / "er0080__metrics_vllm_0.25.1_idle.txt",
    "metrics-after.txt": FIXTURES
    / "vllm-metrics"
    / "er0080__metrics_vllm_0.25.1_loaded_128conc.txt",
    "bench.json": FIXTURES / "vllm-bench" / "er0080__bench_serve_v0.25.1__opt-125m_cpu.json",
    "smi.txt": FIXTURES / "nvidia-smi" / "telegraf__a100-sxm4-v12.xml",
    "kernel-log.txt": FIXTURES / "kernel-log" / "debian12-firecracker-vm__dmesg_iso.txt",
}
CRASH_SEQ = 7777
CHANGE_POINTS = (3000, 15000)
BATCH = 500


def window_metrics(seq: int) -> dict:
    return {"crashed": seq == CRASH_SEQ, "completed": 300, "failed": 0, "notes": []}


def window_files(seq: int, captures: dict[str, bytes]) -> list:
    """One window's raw files as the collector stores them (the line is seq's own)."""
    from runners.artifact import Artifact
    from runners.soak import collector

    folder = collector.window_folder(seq)
    start = T0 + seq * WINDOW_S
    line = {"seq": seq, "start": start, "end": start + WINDOW_S, "crashed": seq == CRASH_SEQ}
    log = "".join(f"[{start + i:.3f}] request {i} done\n" for i in range(40)).encode()
    files = {**captures, "bench.log": log, collector.LINE_FILE: json.dumps(line).encode()}
    return [Artifact(f"{folder}{name}", "bench", content) for name, content in files.items()]


def sealed_soak(windows: int, every: int):
    """A finished soak with every window's raw files, decided and sealed now."""
    from django.utils import timezone

    from gates.evidence import keys
    from gates.models import Decision, EvidenceSeal, Organization, Run, Soak
    from gates.services.runs.results import run_artifacts_store

    label = f"retention-{time.time_ns()}"
    org = Organization.objects.create(name=label, slug=label, kind="customer")
    run = g4_run_with_windows(org, label, windows, window_metrics)
    document = {
        **run.spec.document,
        "retention": {"keep_every_nth_window": every, "keep_after_sealed_days": 0},
    }
    type(run.spec).objects.filter(pk=run.spec.pk).update(document=document)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(state="finished", outcome="completed", finished_at=now)
    Soak.objects.create(run=run, run_dir="/tmp/b", agent_sha256="0" * 64, state="ended")
    captures = {name: path.read_bytes() for name, path in RAW.items()}
    for first in range(0, windows, BATCH):
        seqs = range(first, min(first + BATCH, windows))
        run_artifacts_store(
            run_id=run.pk, artifacts=[a for seq in seqs for a in window_files(seq, captures)]
        )
    clauses = [{"check": "throughput_drift", "change_points": [{"seq": s} for s in CHANGE_POINTS]}]
    decision = Decision.objects.create(
        gate=run.gate, spec=run.spec, verdict="pass", clauses=clauses, result={"clauses": clauses}
    )
    decision.runs.add(run)
    EvidenceSeal.objects.create(
        decision=decision, key=keys.key_active(), payload=b"{}", signature=b"",
        created_at=now - timedelta(seconds=1),
    )  # fmt: skip
    return run


def stored(run_id: int) -> tuple[int, int, int | None]:
    """(files, bytes handed to the database, bytes as stored on PostgreSQL or None)."""
    from django.db import connection
    from django.db.models import Count, Sum

    from gates.models import Artifact

    totals = Artifact.objects.filter(run_id=run_id).aggregate(n=Count("id"), size=Sum("size"))
    on_disk = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sum(pg_column_size(content)) FROM gates_artifact WHERE run_id = %s",
                [run_id],
            )
            on_disk = int(cursor.fetchone()[0] or 0)
    return totals["n"], int(totals["size"] or 0), on_disk


def mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", action="store_true", help="DATABASE_URL's server")
    parser.add_argument("--windows", type=int, default=25_920)
    parser.add_argument("--every", type=int, default=60, help="keep_every_nth_window")
    options = parser.parse_args()
    configure(tempfile.mkdtemp(prefix="tollgate-bench-"), options.postgres)
    from gates import services
    from gates.models import Soak

    began = time.perf_counter()
    run = sealed_soak(options.windows, options.every)
    print(f"stored {options.windows} windows' raw files in {time.perf_counter() - began:.1f} s")
    before = stored(run.pk)
    began = time.perf_counter()
    while (result := services.soak_prune(run_id=run.pk, budget_s=3600)) and not result.done:
        pass
    took = time.perf_counter() - began
    after = stored(run.pk)
    record = Soak.objects.get(run=run).retention
    print(f"policy: keep every {options.every}th window, and the telling ones")
    print(f"windows: {record['windows']}, raw files kept for {record['kept_windows']}")
    for label, (files, size, on_disk) in (("before", before), ("after", after)):
        print(f"{label:6}: {files:>7,} files, {mib(size)} raw, {mib(on_disk)} stored")
    if before[1]:
        print(f"per window before: {before[1] / options.windows / 1024:.1f} KiB raw", end="")
        if before[2] is not None:
            print(f", {before[2] / options.windows / 1024:.1f} KiB stored", end="")
        print()
    print(f"pruning took {took:.1f} s ({before[0] - after[0]:,} files in chunks of 1,000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
