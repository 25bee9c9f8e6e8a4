"""The soak page of a 72 h soak at 10 s windows (25,920 stored windows, every series of the
page filled): server time and bytes sent, against a naive page of the same data that draws
every window of every series (no downsampling), in the same run. The zoom route is timed too
(an hour of the soak: 360 windows, full resolution).

Targets (issue 18): server time <= 250 ms, <= 1.5 MB sent, at least 5x lighter than naive.
Runs on a throwaway SQLite database, or on PostgreSQL with --postgres (DATABASE_URL: give a
scratch database, the bench migrates it and adds an organization per run).

    .venv/bin/python bench/soak_page.py [--postgres] [--windows 25920] [--repeats 7]
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.g4_soak import T0, WINDOW_S, configure, g4_run_with_windows  # noqa: E402


def window_metrics(seq: int) -> dict:
    """A plausible window: slow wobble, a little noise, memory creeping up."""
    wobble = 1 + 0.03 * math.sin(seq / 500) + 0.01 * ((seq * 7919) % 13 - 6) / 6
    return {
        "crashed": seq == 20000,
        "completed": 300,
        "failed": 3 if seq % 997 == 0 else 0,
        "output_throughput": 500 * wobble,
        "ttft_p50_ms": 800 / wobble,
        "ttft_p99_ms": 2000 / wobble,
        "kv_cache_usage": 0.6 + 0.1 * math.sin(seq / 50),
        "external_hit_rate": 0.93 + 0.02 * math.cos(seq / 80),
        "memory_bytes": 40e9 + seq * 1000,
        "server_rss_bytes": 40e9 + seq * 1000,
        "host_available_bytes": 400e9 - seq * 900,
        "gpu_memory_used_mib": 71000 + (seq % 5),
        "notes": [],
    }


def make_soak(windows: int):
    from gates.models import Membership, Organization, Soak

    label = f"page-{time.time_ns()}"
    org = Organization.objects.create(name=label, slug=label, kind="vendor")
    customer = Organization.objects.create(name=f"{label}-c", slug=f"{label}-c", kind="customer")
    run = g4_run_with_windows(customer, label, windows, window_metrics)
    gaps = [{"after_seq": 9000, "start": T0 + 9001 * WINDOW_S, "end": T0 + 9001 * WINDOW_S + 600}]
    Soak.objects.create(
        run=run,
        run_dir="/tmp/bench-soak",
        agent_sha256="0" * 64,
        started=T0,
        deadline=T0 + 72 * 3600,
        last_seq=windows - 1,
        gaps=gaps,
    )
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(label, password="x")
    Membership.objects.create(user=user, organization=org, role=Membership.Role.VENDOR_ADMIN)
    return run, user


def timed_get(client, url: str, repeats: int, *, cold: bool = False) -> tuple[float, int, int]:
    """(median server seconds, bytes sent, bytes gzip would send) of GET url; `cold` empties
    the cache first each time (the first view of a soak, or one with no cache at all)."""
    from django.core.cache import cache

    times, body = [], b""
    for _ in range(repeats):
        if cold:
            cache.clear()
        began = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - began)
        assert response.status_code == 200, response.status_code
        body = response.content
    return statistics.median(times), len(body), len(gzip.compress(body, 6))


def read_from_json(samples):
    """The table as the page read it before SoakSample had columns: every number cast from
    each row's JSON by the database (kept here to measure the columns against it)."""
    import numpy as np
    from django.db import connection
    from django.db.models import Case, FloatField, Value, When
    from django.db.models.fields.json import KeyTextTransform
    from django.db.models.functions import Cast

    from gates.pages.soak import columns as soakcolumns

    numbers = {
        f"n_{name}": Cast(KeyTextTransform(name, "metrics"), FloatField())
        for name in soakcolumns.NUMBERS
    }
    crashed = Case(
        When(metrics__crashed=True, then=Value(1.0)), default=Value(0.0), output_field=FloatField()
    )
    query = (
        samples.annotate(epoch=soakcolumns.Epoch("window_start"), n_crashed=crashed, **numbers)
        .order_by("seq")
        .values_list("seq", "epoch", "n_crashed", *numbers)
    )
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return np.array(rows, dtype=float).reshape(len(rows), len(soakcolumns.COLUMNS))


def measure(client, run, repeats: int) -> dict[str, tuple[float, int, int]]:
    from unittest import mock

    from django.urls import reverse

    from gates.pages.soak import columns as soakcolumns
    from gates.pages.soak import view as soakview

    page = reverse("gates:run-detail", args=[run.pk])
    zoom = reverse("gates:soak-series", args=[run.pk]) + "?from_h=30&to_h=31"
    client.get(page)  # warm the templates and the database's pages
    found = {
        "page, first view (cache empty)": timed_get(client, page, repeats, cold=True),
        "page, stored windows cached": timed_get(client, page, repeats),
        "zoom route, 1 h at full resolution": timed_get(client, zoom, repeats),
    }
    with mock.patch.object(soakcolumns, "_read", read_from_json):
        found["page, first view, read from JSON"] = timed_get(client, page, repeats, cold=True)
    downsampled = soakview.soak_page
    naive = lambda run, soak: downsampled(run, soak, full_resolution=True)  # noqa: E731
    with mock.patch.object(soakview, "soak_page", naive):
        few = max(2, repeats // 2)
        found["naive page, first view"] = timed_get(client, page, few, cold=True)
        found["naive page, stored windows cached"] = timed_get(client, page, few)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="use DATABASE_URL")
    parser.add_argument("--windows", type=int, default=25920)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tollgate-bench-") as scratch:
        os.environ["ALLOWED_HOSTS"] = "testserver"
        configure(scratch, args.postgres)
        from django.test import Client

        run, user = make_soak(args.windows)
        client = Client()
        client.force_login(user)
        found = measure(client, run, args.repeats)
    database = "PostgreSQL" if args.postgres else "SQLite"
    print(f"soak page, {args.windows} windows x 9 series ({database})")
    for label, (seconds, sent, zipped) in found.items():
        print(
            f"   {label:<36} {1000 * seconds:7.0f} ms  {sent / 1e6:6.2f} MB "
            f"({zipped / 1e6:5.2f} MB gzipped)"
        )
    cold, naive = found["page, first view (cache empty)"], found["naive page, first view"]
    before = found["page, first view, read from JSON"]
    print(
        f"   naive / downsampled: {naive[1] / cold[1]:.1f}x the bytes, "
        f"{naive[0] / cold[0]:.1f}x the server time of a first view; "
        f"columns vs JSON on a first view: {before[0] / cold[0]:.1f}x faster"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
