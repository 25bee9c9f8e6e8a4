"""Verify an evidence bundle offline: member hashes, signatures, and the verdict recomputed
from the raw files. Reads no database and opens no connection (the same code as
bin/tollgate-verify); exit 0 only when every check holds."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from gates.evidence.verify import main


class Command(BaseCommand):
    help = "Verify a Tollgate evidence bundle (zip) without the database or the network."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("bundle")
        parser.add_argument("--public-key", help="the server's public key (PEM or OpenSSH line)")
        parser.add_argument("--party-key", action="append", default=[])

    def handle(self, *args, **options):
        argv = [options["bundle"]]
        if options["public_key"]:
            argv += ["--public-key", options["public_key"]]
        for path in options["party_key"]:
            argv += ["--party-key", path]
        code = main(argv)
        if code:
            raise CommandError("the bundle does not verify", returncode=code)
