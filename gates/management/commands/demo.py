"""`python manage.py demo`: a demo vendor and customer, demo engagements, and the services.

Without --once it starts web, worker and beat on the embedded defaults and serves
http://127.0.0.1:8000 until interrupted. With --once it sets everything up, walks the demo
flow headless, prints a summary and exits non-zero if any step broke.
"""

from __future__ import annotations

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

from gates.demo import DemoStep, build_demo_world

WEB_ADDRESS = "127.0.0.1:8000"
READY_TIMEOUT_S = 30


class Command(BaseCommand):
    help = "Set up demo organizations and engagements, then serve them (or --once: headless)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="run headless and exit")
        parser.add_argument("--address", default=WEB_ADDRESS, help="where the web server binds")

    def handle(self, *args, once: bool, address: str, **options) -> None:
        call_command("migrate", verbosity=0, interactive=False)
        logins = {name: secrets.token_urlsafe(9) for name in ("vendor", "customer", "viewer")}
        world = build_demo_world(passwords=logins)
        self._print_logins(logins)
        if once:
            steps = world.walk()
            self._print_summary(steps)
            if any(not step.ok for step in steps):
                raise CommandError("the demo flow broke; see the summary above")
            return
        self._serve(address)

    def _print_logins(self, logins: dict[str, str]) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING("Demo logins (new passwords each run):"))
        for name, password in logins.items():
            self.stdout.write(f"  {name:<9} password {password}")

    def _print_summary(self, steps: list[DemoStep]) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING("Demo summary:"))
        for step in steps:
            mark = self.style.SUCCESS("ok  ") if step.ok else self.style.ERROR("FAIL")
            self.stdout.write(f"  {mark} {step.name}: {step.detail}")

    def _serve(self, address: str) -> None:
        processes = _start_services(address)
        try:
            _wait_until_serving(f"http://{address}/login/", processes)
            self.stdout.write(self.style.SUCCESS(f"Serving http://{address}/  (Ctrl-C stops)"))
            while all(p.poll() is None for p in processes):
                time.sleep(1)  # a supervisor loop, not a wait for an event
            raise CommandError("a demo service exited; see its output above")
        except KeyboardInterrupt:
            self.stdout.write("Stopping...")
        finally:
            _stop(processes)


def _start_services(address: str) -> list[subprocess.Popen]:
    python = sys.executable
    base = Path(settings.BASE_DIR)
    commands = [
        [
            python,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--bind",
            address,
            "--workers",
            "2",
            "--access-logfile",
            "-",
        ],
        [
            python,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "2",
        ],
        [
            python,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            str(Path(settings.VAR_DIR) / "celerybeat-schedule"),
        ],
    ]
    return [subprocess.Popen(command, cwd=base) for command in commands]


def _wait_until_serving(url: str, processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise CommandError("a demo service failed to start")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (local URL)
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise CommandError(f"the web server did not answer at {url} within {READY_TIMEOUT_S} s")


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
