"""What the soak benches share (bench/g4_soak.py, bench/soak_fleet.py): a throwaway database, the
agent's window lines and raw files as a host keeps them, and soak data directories a collector
tick reads over SSH. A helper, not a bench: `make bench` runs only the scripts with a main."""

from __future__ import annotations

import atexit
import json
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
BENCH_FILE = FIXTURES / "vllm-bench" / "er0080__bench_serve_v0.25.1__opt-125m_cpu.json"
METRICS_FILE = FIXTURES / "vllm-metrics" / "er0080__metrics_vllm_0.25.1_idle.txt"
HOSTCTL = ROOT / "runners" / "remote" / "hostctl.py"
RAW_FILES = {
    "bench.json": BENCH_FILE,
    "metrics-before.txt": METRICS_FILE,
    "metrics-after.txt": METRICS_FILE,
}
WINDOW_S = 10.0
T0 = 1.8e9
BENCH_KEYS = "YmVuY2gta2V5LTAwMDAwMDAwMDAwMDAwMDAwMDAwMDA="


def configure(var_dir: str, postgres: bool, keep: tuple[str, ...] = ()) -> None:
    """Django on a throwaway database: SQLite under var_dir, or with `postgres` a fresh
    test_<name> database on DATABASE_URL's server, dropped at exit (so a bench runs any number
    of times). Environment names in `keep` (a broker) are left as they are."""
    keep = (*keep, "DATABASE_URL") if postgres else keep
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):
        if name not in keep:
            os.environ.pop(name, None)
    os.environ.update(
        DEBUG="true",
        TOLLGATE_VAR_DIR=var_dir,
        TOLLGATE_ENV_FILE="",
        DJANGO_SETTINGS_MODULE="config.settings",
        TOLLGATE_ENCRYPTION_KEYS=BENCH_KEYS,
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if not postgres:
        call_command("migrate", verbosity=0)
        return
    made = connection.creation.create_test_db(verbosity=0, keepdb=False, serialize=False)
    atexit.register(connection.creation.destroy_test_db, made, verbosity=0)


def window_line(seq: int, *, crashed: bool = False, start: float | None = None) -> dict:
    """The agent's line for window `seq` (from T0 on unless `start` is given)."""
    start = T0 + seq * WINDOW_S if start is None else start
    return {
        "seq": seq,
        "start": start,
        "end": start + WINDOW_S,
        "boot_id": "b",
        "agent_pid": 1,
        "server_pid": 2,
        "crashed": crashed,
        "crash": None,
        "bench_exit": 0,
        "files": sorted(RAW_FILES),
        "server_rss_bytes": 40e9 + seq * 1000,
    }


def soak_dir(run_dir: Path) -> None:
    """A soak's run directory on the host, as the launch leaves it: the reader and an empty
    data directory."""
    (run_dir / "soak-data" / "raw").mkdir(parents=True)
    shutil.copy(HOSTCTL, run_dir / "hostctl.py")


def raw_sources(folder: Path) -> dict[str, Path]:
    """Copies of the raw files for append_window to link to (a file takes at most 65,000 hard
    links: give each few soaks copies of their own)."""
    folder.mkdir(parents=True)
    for name, source in RAW_FILES.items():
        shutil.copy(source, folder / name)
    return {name: folder / name for name in RAW_FILES}


def append_window(run_dir: Path, line: dict, *, link_to: dict[str, Path] | None = None) -> None:
    """Write a window as the agent does: its raw files first, then its whole line. With
    `link_to` (raw_sources) the raw files are hard links (same bytes, no copy: for thousands)."""
    data = run_dir / "soak-data"
    folder = data / "raw" / str(line["seq"])
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in RAW_FILES.items():
        if link_to is not None:
            os.link(link_to[name], folder / name)
        else:
            shutil.copy(source, folder / name)
    with open(data / "windows.jsonl", "a") as lines:
        lines.write(json.dumps(line) + "\n")
