"""Re-encrypt every stored host credential with the newest TOLLGATE_ENCRYPTION_KEYS key."""

from django.core.management.base import BaseCommand

from gates import services


class Command(BaseCommand):
    help = "Re-encrypt stored SSH credentials with the first (newest) encryption key."

    def handle(self, *args, **options) -> None:
        rotated = services.host_rotate_credentials()
        services.audit_record(
            actor=services.Actor.system("rotate_keys"),
            action="credentials.rotate",
            detail={"rotated": rotated},
        )
        self.stdout.write(f"re-encrypted {rotated} credential(s) with the newest key")
