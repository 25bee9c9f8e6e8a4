from django.apps import AppConfig


class WorkerConfig(AppConfig):
    """Registered so Celery finds worker/tasks.py; the worker has no models."""

    name = "worker"
