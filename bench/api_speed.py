"""Benchmark: throughput and p95 latency of GET /api/v1/gates/{id}/ under gunicorn against a bare
DRF endpoint returning a constant, in the same run, on PostgreSQL (target: the gate read at
least half the bare endpoint's throughput), and the queries one gate read costs.

Both endpoints go through the same gunicorn, middleware, bearer-token authentication and Redis
throttle; rounds alternate bare / gate so drift on a shared machine hits both alike. The gate
read carries a G3-sized decision (12 clause cells). The database is made fresh each run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tollgate_bench_api \\
    CACHE_URL=redis://127.0.0.1:6379/14 \\
    .venv/bin/python bench/api_speed.py [--workers 3] [--clients 16] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psycopg

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(REPO), str(BENCH)]
ENVIRONMENT = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tollgate_bench_api",
    "CACHE_URL": "redis://127.0.0.1:6379/14",
    "SECRET_KEY": "bench-only-3f1c9a7e5b2d4c6e8a0b1d3f5e7c9a2b4d6f8e0a1c3e5b7d9f",
    "TOLLGATE_ENCRYPTION_KEYS": "YmVuY2gta2V5LTAwMDAwMDAwMDAwMDAwMDAwMDAwMDA=",
    "DEBUG": "false",
    "SECURE_SSL_REDIRECT": "false",
    "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    # The throttle still runs (a Redis round trip per request, as in production), but never bites.
    "API_THROTTLE_RATE": "100000000/minute",
    "LOG_LEVEL": "WARNING",
    "DJANGO_SETTINGS_MODULE": "api_speed_settings",
}
for _name, _value in ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)


def fresh_database() -> None:
    url = os.environ["DATABASE_URL"]
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')


def seed() -> tuple[int, str, int]:
    """Migrate and make one decided gate; (gate id, a read token, queries per gate read)."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    gate, secret = decided_gate()
    return gate.pk, secret, gate_read_queries(gate.pk, secret)


def decided_gate():
    """A customer engagement whose G1 carries a G3-sized decision, and a vendor read token."""
    from django.contrib.auth import get_user_model

    from gates import services
    from gates.models import Host, Membership, Organization, Profile
    from gates.tenancy import viewer_for_user

    vendor = Organization.objects.create(name="Acme KV", slug="acme", kind="vendor")
    customer = Organization.objects.create(name="Northwind", slug="northwind", kind="customer")
    user = get_user_model().objects.create_user(username="bench", password="bench-only-pw-1")
    Membership.objects.create(user=user, organization=vendor, role="vendor_admin")
    actor, viewer = services.Actor(user=user, label="bench"), viewer_for_user(user)
    engagement = services.engagement_create(
        actor=actor, organization=customer, title="bench", model_name="m"
    )
    host = Host.objects.create(
        organization=customer,
        name="gpu-1",
        transport="ssh",
        address="10.0.0.5",
        username="bench",
        host_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
        profile=Profile.objects.get(name="vllm"),
        key_file_path="/etc/tollgate/key",
    )
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": g3_cells()})
    _, secret = services.api_token_create(
        actor=actor, viewer=viewer, organization=vendor, name="bench", scopes=["read"]
    )
    return gate, secret


def g3_cells() -> list[dict]:
    clauses = [
        ("ttft_p50", "reduction", 25),
        ("output_throughput", "gain", 29),
        ("output_throughput", "gain", 40),
        ("ttft_p50", "ratio", 8.6),
    ]
    return [
        {
            "metric": metric,
            "compare": "offload/baseline",
            "change": change,
            "tier": tier,
            "threshold": threshold,
            "estimate": threshold * 1.2,
            "low": threshold * 1.1,
            "high": threshold * 1.3,
            "verdict": "pass",
            "cause": "interval clears the threshold",
        }
        for metric, change, threshold in clauses
        for tier in (4, 8, 16)
    ]


def gate_read_queries(gate_id: int, secret: str) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    client.get(f"/api/v1/gates/{gate_id}/")  # the first use stamps last_used_at
    with CaptureQueriesContext(connection) as captured:
        assert client.get(f"/api/v1/gates/{gate_id}/").status_code == 200
    return len(captured.captured_queries)


class Gunicorn:
    def __init__(self, workers: int, port: int) -> None:
        command = [
            *(sys.executable, "-m", "gunicorn", "config.wsgi"),
            *("--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--timeout", "30"),
            *("--pythonpath", f"{REPO},{BENCH}", "--log-level", "warning"),
        ]
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(command, cwd=REPO)

    def wait_ready(self, path: str, headers: dict, deadline_s: float = 60) -> None:
        import urllib.request

        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                request = urllib.request.Request(self.url + path, headers=headers)
                with urllib.request.urlopen(request, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("gunicorn did not answer within a minute")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def load(url: str, headers: dict, clients: int, seconds: float) -> tuple[list[float], int]:
    """`clients` concurrent loops for `seconds`; (latencies in s of 200s, count of others)."""
    latencies: list[float] = []
    errors = 0
    stop_at = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:

        async def client() -> None:
            nonlocal errors
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                async with session.get(url) as response:
                    await response.read()
                    if response.status == 200:
                        latencies.append(time.perf_counter() - started)
                    else:
                        errors += 1

        await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, errors


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (as deployed)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0, help="per round and endpoint")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    fresh_database()
    gate_id, secret, queries = seed()
    headers = {"Authorization": f"Bearer {secret}", "Accept": "application/json"}
    server = Gunicorn(args.workers, args.port)
    targets = {"bare": "/bench/bare/", "gate": f"/api/v1/gates/{gate_id}/"}
    results: dict[str, tuple[list[float], int]] = {name: ([], 0) for name in targets}
    try:
        server.wait_ready(targets["gate"], headers)
        asyncio.run(load(server.url + targets["bare"], headers, args.clients, 1.0))  # warm up
        for _ in range(args.rounds):
            for name, path in targets.items():
                latencies, errors = asyncio.run(
                    load(server.url + path, headers, args.clients, args.seconds)
                )
                results[name][0].extend(latencies)
                results[name] = (results[name][0], results[name][1] + errors)
    finally:
        server.stop()
    report(args, results, queries)


def report(args, results: dict, queries: int) -> None:
    elapsed = args.seconds * args.rounds
    print(
        f"gunicorn --workers {args.workers}, {args.clients} clients, "
        f"{args.rounds} x {args.seconds:g} s per endpoint, PostgreSQL, cpus={os.cpu_count()}"
    )
    print(f"{'endpoint':<28} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'errors':>7}")
    rate = {}
    for name, (latencies, errors) in results.items():
        rate[name] = len(latencies) / elapsed
        label = "bare DRF constant" if name == "bare" else "GET /api/v1/gates/{id}/"
        print(
            f"{label:<28} {rate[name]:>8.0f} {quantile(latencies, 0.5) * 1000:>8.1f} "
            f"{quantile(latencies, 0.95) * 1000:>8.1f} {errors:>7}"
        )
    ratio = rate["gate"] / rate["bare"] if rate["bare"] else float("nan")
    verdict = "meets" if ratio >= 0.5 else "MISSES"
    print(f"gate/bare throughput {ratio:.2f} ({verdict} the target >= 0.50)")
    print(f"queries per gate read: {queries} (pinned in tests/gates/api/test_api_queries.py)")


if __name__ == "__main__":
    main()
