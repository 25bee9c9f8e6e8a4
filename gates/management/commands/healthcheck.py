"""The dead-man switch for cron, systemd or a monitor: exits non-zero naming what is stale,
and (unless --no-alert) sends "Tollgate has gone silent" itself, since the beat that would
deliver an alert may be the very thing that died. Prints the JSON /healthz reports."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from gates import services

EXIT_STALE = 1
EXIT_DATABASE = 2


class Command(BaseCommand):
    help = "Check the worker and beat heartbeats; exit 1 naming what is stale (2: no database)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--no-alert", action="store_true", help="only report; send no silence alert"
        )

    def handle(self, *args, **options) -> None:
        try:
            report = services.heartbeat_report()
        except DatabaseError as error:
            raise CommandError(
                f"database unreachable: {error}", returncode=EXIT_DATABASE
            ) from error
        self.stdout.write(json.dumps(report, sort_keys=True))
        stale = report["stale"]
        if not stale:
            return
        if not options["no_alert"]:
            alert = services.silence_alert_send(stale=stale)
            sent = "sent" if alert and alert.delivered_at else "queued, not yet sent"
            self.stderr.write(f"silence alert {sent}")
        raise CommandError(f"stale: {', '.join(stale)}", returncode=EXIT_STALE)
