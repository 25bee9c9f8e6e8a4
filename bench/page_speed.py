"""Benchmark: server time, bytes and queries of the engagement list with 500 engagements and of
the gate and engagement pages with 50 runs, against the same pages with one engagement / run,
in the same run on PostgreSQL. The pages go through Django's full middleware stack in-process
(Django's test client): this measures the server's work, not a network.

The target is a constant number of queries (tests/gates/pages/test_page_queries.py pins it);
the times are reported so a regression shows. The database is made fresh each run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tollgate_bench_pages \\
    CACHE_URL=redis://127.0.0.1:6379/13 \\
    .venv/bin/python bench/page_speed.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]
ENVIRONMENT = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tollgate_bench_pages",
    "CACHE_URL": "redis://127.0.0.1:6379/13",
    "SECRET_KEY": "bench-only-7a1c9e3f5b2d4c6e8a0b1d3f5e7c9a2b4d6f8e0a1c3e5b7d9f",
    "TOLLGATE_ENCRYPTION_KEYS": "YmVuY2gta2V5LTAwMDAwMDAwMDAwMDAwMDAwMDAwMDA=",
    "DEBUG": "false",
    "SECURE_SSL_REDIRECT": "false",
    "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    "LOG_LEVEL": "WARNING",
    "DJANGO_SETTINGS_MODULE": "config.settings",
}
for _name, _value in ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)


def fresh_database() -> None:
    url = os.environ["DATABASE_URL"]
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')


def world():
    """A vendor admin and one customer engagement made by the service."""
    from django.contrib.auth import get_user_model

    from gates import services
    from gates.models import Membership, Organization

    vendor = Organization.objects.create(name="Acme KV", slug="acme", kind="vendor")
    customer = Organization.objects.create(name="Northwind", slug="northwind", kind="customer")
    user = get_user_model().objects.create_user(username="bench", password="bench-only-pw-1")
    Membership.objects.create(user=user, organization=vendor, role="vendor_admin")
    engagement = services.engagement_create(
        actor=services.Actor(user=user, label="bench"),
        organization=customer,
        title="bench",
        model_name="m",
    )
    return user, engagement


def measure(client, url: str, repeat: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm: templates compiled, session read once
    times, size = [], 0
    for _ in range(repeat):
        began = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - began) * 1000)
        size = len(response.content)
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return {"ms": statistics.median(times), "bytes": size, "queries": len(captured)}


def report(name: str, before: dict, after: dict, label: str) -> None:
    print(
        f"{name:<18} 1 {label:<12} {before['ms']:7.1f} ms {before['bytes']:>8} B "
        f"{before['queries']:>3} q | {after['ms']:7.1f} ms {after['bytes']:>8} B "
        f"{after['queries']:>3} q   (median of the repeats)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    fresh_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from tests.gates.pages.test_page_queries import more_engagements, more_runs

    # Production serves hashed static names from a manifest `collectstatic` writes; the bench
    # runs without one, so pages name the plain files (one lookup either way).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    call_command("migrate", verbosity=0)
    user, engagement = world()
    client = Client()
    client.force_login(user)
    gate = engagement.gates.get(kind="G1")
    more_runs(gate, 1)
    pages = {
        "engagement list": reverse("gates:engagement-list"),
        "gate page": reverse("gates:gate-detail", args=[gate.pk]),
        "engagement page": reverse("gates:engagement-detail", args=[engagement.pk]),
    }
    before = {name: measure(client, url, args.repeat) for name, url in pages.items()}
    more_engagements(engagement, 499)
    more_runs(gate, 49)
    after = {name: measure(client, url, args.repeat) for name, url in pages.items()}
    print("page               with one ...            | with 500 engagements / 50 runs")
    for name in pages:
        report(name, before[name], after[name], "engagement" if "list" in name else "run")
    grew = [name for name in pages if after[name]["queries"] != before[name]["queries"]]
    if grew:
        print(f"FAIL: queries grew on {', '.join(grew)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
