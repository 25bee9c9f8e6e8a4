from django.apps import AppConfig


class RunnersConfig(AppConfig):
    """Registered only so Celery finds runners/tasks.py; runners has no models."""

    name = "runners"
