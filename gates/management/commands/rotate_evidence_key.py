"""Retire the evidence signing key and make a new one; old public keys stay listed at
GET /api/v1/keys/ with their validity, so bundles they signed still verify."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from gates.evidence.keys import key_rotate


class Command(BaseCommand):
    help = "Rotate the Ed25519 key that signs evidence bundles."

    def add_arguments(self, parser):
        parser.add_argument("--valid-days", type=int, default=None, help="the new key's lifetime")

    def handle(self, *args, **options):
        key = key_rotate(valid_days=options["valid_days"])
        self.stdout.write(f"new evidence signing key {key.fingerprint}\n{key.public_key}\n")
