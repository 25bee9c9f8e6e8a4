from django.apps import AppConfig


class GatesConfig(AppConfig):
    name = "gates"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gates import signals  # noqa: F401  (built-in profiles on migrate, lockouts audited)
