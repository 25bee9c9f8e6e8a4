"""Alert latency: from a gate's failing decision being committed to the SMTP server accepting
its email, with a real Celery worker delivering (the poke after commit, the outbox claim, the
SMTP exchange). Target: p95 < 2 s over >= 50 alerts.

Needs the PostgreSQL and Redis of the tests (DATABASE_URL, CELERY_BROKER_URL); a throwaway
database `test_<name>` is created and dropped. The SMTP server is aiosmtpd in this process.

    .venv/bin/python bench/alert_latency.py [--alerts 60] [--burst 50]

Three phases in one run: alerts one at a time (each waits for the previous email), then a burst
of decisions committed back to back (queueing behind one worker of concurrency 1), then the
anchor: the same alert emails sent straight from this process over a fresh SMTP connection
each (no commit, queue or worker), so the p95s compare as a ratio measured side by side.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from email import message_from_bytes
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.targets import timing_target_status  # noqa: E402 (after the path)


class Arrivals:
    """aiosmtpd handler: when each Message-ID was accepted."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.changed = threading.Condition()

    async def handle_DATA(self, server, session, envelope):
        message = message_from_bytes(envelope.content)
        with self.changed:
            self.at[message["Message-ID"]] = time.time()
            self.changed.notify_all()
        return "250 OK"

    def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.at) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"only {len(self.at)} of {count} emails within {timeout} s")
                self.changed.wait(left)


def configure() -> None:
    import tests.testenv  # noqa: F401  the tests' environment (keys, broker db), env wins

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["TOLLGATE_ONCALL_EMAILS"] = "oncall@bench.example"
    import django

    django.setup()


def world():
    """A vendor admin, a customer, and one host per alert to come (runs lease their host)."""
    from django.contrib.auth import get_user_model

    from gates import services
    from gates.models import Membership, Organization
    from gates.tenancy import viewer_for_user
    from tests.conftest import make_host

    vendor = Organization.objects.create(name="Bench vendor", slug="bv", kind="vendor")
    customer = Organization.objects.create(name="Bench customer", slug="bc", kind="customer")
    admin = get_user_model().objects.create_user("admin", email="admin@bench.example")
    Membership.objects.create(user=admin, organization=vendor, role="vendor_admin")
    return services.Actor(user=admin, label="bench"), viewer_for_user(admin), customer, make_host


def fail_one(actor, viewer, customer, make_host, index: int) -> tuple[str, float]:
    """Commit a failing G1 decision; returns its alert's Message-ID and the commit time."""
    from gates import services
    from gates.alerts.mail import message_id
    from gates.models import Alert
    from tests.contract import sign_as_both

    engagement = services.engagement_create(
        actor=actor, organization=customer, title=f"bench {index}", model_name="m"
    )
    host = make_host(customer, name=f"gpu-{index}")
    gate = engagement.gates.get(kind="G1")
    # In force, or the failing decision is a rehearsal's and raises no alert.
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clause = {"check": "gpu_count", "verdict": "fail", "cause": "4 observed, 8 expected"}
    services.decision_record(run_id=run.pk, result={"verdict": "fail", "clauses": [clause]})
    committed = time.time()
    alert = Alert.objects.get(gate=gate, parent__isnull=True)
    return message_id(alert.idempotency_key), committed


def direct_sends(arrivals: Arrivals, port: int, count: int) -> list[float]:
    """The anchor: each stored alert's email sent from here, SMTP connect to accept."""
    from django.core.mail import get_connection

    from gates.alerts.mail import alert_email, message_id
    from gates.models import Alert

    alerts = list(Alert.objects.filter(parent__isnull=True).order_by("id")[:count])
    latencies = []
    for index, alert in enumerate(alerts):
        key = f"direct-{index}"
        expected = len(arrivals.at) + 1  # accepted before send() returns: count it first
        started = time.time()
        connection = get_connection(
            "django.core.mail.backends.smtp.EmailBackend", host="127.0.0.1", port=port
        )
        connection.open()
        alert_email(
            key=key,
            root_key=None,
            recipients=alert.recipients,
            subject=alert.subject,
            text=alert.body,
            html=alert.html_body,
            connection=connection,
        ).send()
        connection.close()
        arrivals.wait(expected, 60)
        latencies.append(arrivals.at[message_id(key)] - started)
    return latencies


def p95_of(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def summary(name: str, latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p95 = p95_of(latencies)
    return (
        f"| {name} | {len(ordered)} | {statistics.median(ordered):.3f} | {p95:.3f} | "
        f"{ordered[-1]:.3f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alerts", type=int, default=60, help="alerts sent one at a time")
    parser.add_argument("--burst", type=int, default=50, help="alerts committed back to back")
    args = parser.parse_args()
    configure()
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    from aiosmtpd.controller import Controller
    from django.db import connection

    from tests.celeryproc import CeleryProcess, purge_broker
    from tests.gates.alerts.conftest import free_port

    arrivals = Arrivals()
    smtp = Controller(arrivals, hostname="127.0.0.1", port=free_port())
    smtp.start()
    os.environ.update(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(smtp.port),
    )
    test_db = connection.creation.create_test_db(verbosity=0, keepdb=False)
    purge_broker()
    scratch = tempfile.TemporaryDirectory(prefix="tollgate-bench-")
    worker = CeleryProcess("worker", Path(scratch.name), "bench-worker").start()
    try:
        return measure(args, arrivals, worker, smtp.port)
    finally:
        worker.stop()
        smtp.stop()
        connection.creation.destroy_test_db(test_db, verbosity=0)
        scratch.cleanup()


def measure(args, arrivals: Arrivals, worker, port: int) -> int:
    actor, viewer, customer, make_host = world()
    # Warm-up: the worker's first task imports and connects; not what an alert waits for.
    fail_one(actor, viewer, customer, make_host, -1)
    arrivals.wait(1, 120)
    spaced = []
    for index in range(args.alerts):
        key, committed = fail_one(actor, viewer, customer, make_host, index)
        arrivals.wait(len(arrivals.at) + 1, 60)
        spaced.append(arrivals.at[key] - committed)
    expected = len(arrivals.at) + args.burst
    sent = [fail_one(actor, viewer, customer, make_host, 1000 + i) for i in range(args.burst)]
    arrivals.wait(expected, 300)
    burst = [arrivals.at[key] - committed for key, committed in sent]
    direct = direct_sends(arrivals, port, args.alerts)
    print("| phase | alerts | p50 s | p95 s | max s |")
    print("|---|---|---|---|---|")
    print(summary("one at a time", spaced))
    print(summary(f"burst of {args.burst}", burst))
    print(summary("anchor: the same emails sent directly", direct))
    p95 = p95_of(spaced)
    print(f"one at a time p95 / direct send p95: {p95 / p95_of(direct):.1f}x (same run)")
    print(f"target p95 < 2 s (one at a time): {'met' if p95 < 2 else 'MISSED'}")
    return timing_target_status(p95 < 2, "alert p95 under 2 s, one at a time")


if __name__ == "__main__":
    raise SystemExit(main())
