"""`python manage.py demo`: a demo vendor and customer, two engagements on simhost (the
emulated GPU host), the services, and a real walk through G1-G3.

Without --once it starts web, worker and beat on the embedded defaults, walks the engagements
while serving http://127.0.0.1:8000, and keeps serving until interrupted. With --once it starts
a worker and beat only, walks headless, prints a summary and exits non-zero if a step broke or
it was stopped (Ctrl-C, SIGTERM) before the end. The engagements are walked side by side;
--engagement picks some of them, --one-at-a-time walks them one after another.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from config.queues import ALL_QUEUES_OPTION
from gates import services
from gates.demo.library import check_library
from gates.demo.supervisor import ServiceExited, Supervised, restart_dead
from gates.demo.walk import DemoStep, walk_demo
from gates.demo.world import (
    DemoEngagement,
    UnknownEngagementError,
    build_demo_world,
    demo_plans_named,
)
from gates.models import Run
from runners.program.driver import stop_all
from runners.transport import LocalTransport

WEB_ADDRESS = "127.0.0.1:8000"
# No gossip or mingle: they serve nothing here, and Celery's restart after a broker outage
# logged errors from them (docs/security.md, "Faults").
QUIET = ("--without-gossip", "--without-mingle")
READY_TIMEOUT_S = 120  # a loaded 2-core box takes a while to boot gunicorn, worker and beat


class Command(BaseCommand):
    help = "Demo organizations and engagements on simhost, walked through G1-G3 for real."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="run headless and exit")
        parser.add_argument(
            "--address",
            default=WEB_ADDRESS,
            help="host:port the web server binds (make demo DEMO_ADDRESS=0.0.0.0:8080)",
        )
        parser.add_argument(
            "--engagement",
            action="append",
            default=[],
            metavar="NAME",
            help="walk only this engagement (its short name or title; repeatable)",
        )
        parser.add_argument(
            "--one-at-a-time",
            action="store_true",
            help="walk the engagements one after another, not side by side (bench/demo_busy.py)",
        )

    def handle(
        self,
        *args,
        once: bool,
        address: str,
        engagement: list[str],
        one_at_a_time: bool,
        **options,
    ) -> None:
        try:
            plans = demo_plans_named(engagement)
        except UnknownEngagementError as unknown:
            raise CommandError(str(unknown)) from None
        call_command("migrate", verbosity=0, interactive=False)
        logins = {name: secrets.token_urlsafe(9) for name in ("vendor", "customer", "viewer")}
        titles = [plan.title for plan in plans]
        engagements = [e for e in build_demo_world(passwords=logins) if e.title in titles]
        self._print_logins(logins)
        # One worker slot per engagement walked side by side, so their runs do not queue
        # behind each other, and one for the predictions, characterisations and alerts.
        slots = 2 if one_at_a_time else len(engagements) + 1
        processes = _start_services(None if once else address, slots=slots)
        # SIGTERM (a service manager, a test) stops the demo as cleanly as Ctrl-C does.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            if not once:
                _wait_until_serving(f"http://{address}/login/", processes)
                self.stdout.write(self.style.SUCCESS(f"Serving http://{address}/"))
                self._print_logins(logins)  # again: the startup output buried the first copy
                self.stdout.flush()  # seen now through a pipe (`make demo | tee`), not at exit
            self.stdout.write(
                "Walking the demo engagements through G1-G3 on simhost "
                "(an emulated GPU host; timings are scaled, not real):"
            )
            steps = walk_demo(
                engagements,
                password=logins["vendor"],
                say=self.stdout.write,
                width=1 if one_at_a_time else None,
            )
            steps += check_library(engagements) if _shows_a_pass(plans) else []
            self._print_summary(steps)
            if once:
                if any(not step.ok for step in steps):
                    raise CommandError("the demo flow broke; see the summary above")
                return
            self.stdout.write(self.style.SUCCESS(f"Still serving http://{address}/ (Ctrl-C stops)"))
            self._print_logins(logins)
            _supervise(processes, say=self.stdout.write)
        except KeyboardInterrupt:
            self.stdout.write("Stopping...")
            if once:  # a headless walk cut short showed nothing: a script must not read ok
                raise CommandError("the demo was stopped before its walk finished") from None
        finally:
            _stop(processes)
            stopped = stop_active_runs(engagements)
            if stopped:
                self.stdout.write(f"Canceled {stopped} unfinished demo run(s).")

    def _print_logins(self, logins: dict[str, str]) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING("Demo logins (new passwords each run):"))
        for name, password in logins.items():
            self.stdout.write(f"  {name:<9} password {password}")

    def _print_summary(self, steps: list[DemoStep]) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING("Demo summary:"))
        for step in steps:
            mark = self.style.SUCCESS("ok  ") if step.ok else self.style.ERROR("FAIL")
            self.stdout.write(f"  {mark} {step.name}: {step.detail}")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _shows_a_pass(plans: list[DemoEngagement]) -> bool:
    """Whether an engagement walked is built to pass G3: the library publishes the first that
    did; with only the short chat walked there is nothing to publish, and that is no failure."""
    return any(plan.expected_g3 == "pass" for plan in plans)


def stop_active_runs(engagements) -> int:
    """Cancel the demo's unfinished runs and stop what they left on this machine (the demo's
    hosts are local), so no emulated server outlives the demo."""
    active = list(
        Run.objects.filter(
            gate__engagement__in=engagements, state__in=[Run.State.QUEUED, Run.State.RUNNING]
        )
    )
    local = LocalTransport("demo")
    for run in active:
        stop_all(local, services.run_remote_dirs(run))
        services.run_mark_canceled(run_id=run.pk, reason="the demo was stopped")
    return len(active)


def _start_services(address: str | None, *, slots: int) -> list[Supervised]:
    """A worker with `slots` processes and beat, plus the web server when `address` is given."""
    python = sys.executable
    celery = [python, "-m", "celery", "-A", "config"]
    schedule = str(Path(settings.VAR_DIR) / "celerybeat-schedule")
    commands = {
        "worker": [*celery, "worker", "--loglevel", "WARNING", "--concurrency", str(slots), *QUIET],
        "beat": [*celery, "beat", "--loglevel", "WARNING", "--schedule", schedule],
    }
    # One worker does every kind of work here (production runs one per queue: compose).
    commands["worker"] += ["--queues", ALL_QUEUES_OPTION]
    if address:
        commands["web"] = [python, "-m", "gunicorn", "-c", "python:config.gunicorn"]
        commands["web"] += ["config.wsgi", "--bind", address, "--workers", "2"]
    # The demo's soak is compressed to seconds: its collector ticks every few seconds too.
    env = {"TOLLGATE_SOAK_TICK_S": "3", "TOLLGATE_SOAK_PROVISIONAL_S": "5", **os.environ}
    return [
        Supervised(name, command, cwd=Path(settings.BASE_DIR), env=env).start()
        for name, command in commands.items()
    ]


def _wait_until_serving(url: str, processes: list[Supervised]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(p.exit_code is not None for p in processes):
            raise CommandError("a demo service failed to start")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (local URL)
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise CommandError(f"the web server did not answer at {url} within {READY_TIMEOUT_S} s")


def _supervise(processes: list[Supervised], say) -> None:
    """Until interrupted: a dead worker or beat is started again; a dead web server ends it."""
    while True:
        try:
            restart_dead(processes, say)
        except ServiceExited as exited:
            raise CommandError(str(exited)) from None
        time.sleep(1)  # a supervisor loop, not a wait for an event


def _stop(processes: list[Supervised]) -> None:
    running = [p.process for p in processes if p.process is not None and p.exit_code is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
