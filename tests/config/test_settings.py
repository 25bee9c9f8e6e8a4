"""Production settings are safe, Celery is configured for late-ack reliability, compose is sane."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from config.celery import app
from config.queues import ALL_QUEUES, QUEUE_OF_TASK

ROOT = Path(__file__).resolve().parents[2]
WORKERS = ("worker", "worker-ticks", "worker-alerts")
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "prod-like-9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170",
    "ALLOWED_HOSTS": "tollgate.example.com",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "TOLLGATE_ENCRYPTION_KEYS": "dGVzdC1rZXktbmV3ZXN0LTAwMDAwMDAwMDAwMDAwMDA=",
}


def run_manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in _ALL_SETTING_NAMES}
    clean.update(env, TOLLGATE_VAR_DIR=str(tmp_path), TOLLGATE_ENV_FILE="")
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


_ALL_SETTING_NAMES = {
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "SECURE_SSL_REDIRECT",
    "STATIC_MANIFEST",
    "WHITENOISE_USE_FINDERS",
    "EMAIL_BACKEND",
    "TOLLGATE_ENCRYPTION_KEYS",
    "TOLLGATE_VAR_DIR",
}


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = run_manage(
        "check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV, tmp_path=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    result = run_manage("check", env=env, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_secret_key_can_come_from_a_file(tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text(PRODUCTION_ENV["SECRET_KEY"] + "\n")
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    env["SECRET_KEY_FILE"] = str(secret_file)
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=env, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr


def test_a_bad_boolean_names_the_variable(tmp_path):
    result = run_manage("check", env={**PRODUCTION_ENV, "DEBUG": "maybe"}, tmp_path=tmp_path)
    assert result.returncode != 0 and "DEBUG must be true or false" in result.stderr


def test_the_embedded_default_is_sqlite_in_wal_mode_and_a_file_broker(tmp_path):
    env = {"DEBUG": "true"}
    probe = (
        "from django.db import connection; c = connection.cursor(); "
        "c.execute('PRAGMA journal_mode'); print(c.fetchone()[0]); "
        "from django.conf import settings; print(settings.CELERY_BROKER_URL)"
    )
    result = run_manage("shell", "-c", probe, env=env, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["wal", "filesystem://"]


class TestCeleryReliability:
    def test_late_acks_with_reject_on_worker_lost_and_prefetch_one(self):
        assert app.conf.task_acks_late is True
        assert app.conf.task_reject_on_worker_lost is True
        assert app.conf.worker_prefetch_multiplier == 1
        # In-flight tasks finish through a broker outage (issue 27), not cut mid-step.
        assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is False

    def test_the_broker_uses_our_transports_for_redis_and_the_file_system(self, tmp_path):
        probe = "from django.conf import settings as s; print(s.CELERY_BROKER_TRANSPORT)"
        for url, expected in (
            ("redis://127.0.0.1:6379/0", "worker.broker:RedisTransport"),
            ("", "worker.broker:FilesystemTransport"),
        ):
            env = {**PRODUCTION_ENV, "CELERY_BROKER_URL": url} if url else {"DEBUG": "true"}
            result = run_manage("shell", "-c", probe, env=env, tmp_path=tmp_path)
            assert result.stdout.split()[-1] == expected, result.stderr

    def test_json_only(self):
        assert app.conf.task_serializer == "json"
        assert app.conf.accept_content == ["json"]

    def test_every_task_ends_well_before_the_visibility_timeout(self):
        app.loader.import_default_modules()
        visibility = settings.CELERY_VISIBILITY_TIMEOUT
        assert settings.CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS["visibility_timeout"] == visibility
        assert app.conf.task_time_limit and app.conf.task_time_limit < visibility / 10
        ours = [t for name, t in app.tasks.items() if name.startswith("runners.")]
        assert ours
        for task in ours:
            limit = task.time_limit or app.conf.task_time_limit
            assert limit < visibility / 10, task.name

    def test_the_redis_transport_carries_the_visibility_timeout(self, tmp_path):
        result = run_manage(
            "shell",
            "-c",
            "from django.conf import settings as s; "
            "print(s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'])",
            env=PRODUCTION_ENV,
            tmp_path=tmp_path,
        )
        assert result.stdout.split()[-1] == str(settings.CELERY_VISIBILITY_TIMEOUT)

    def test_the_beat_schedule_names_only_registered_tasks(self):
        app.loader.import_default_modules()
        for entry in settings.CELERY_BEAT_SCHEDULE.values():
            assert entry["task"] in app.tasks

    def test_every_task_has_a_queue_of_its_kind_and_every_sweep_expires(self):
        app.loader.import_default_modules()
        ours = {name for name in app.tasks if name.startswith("runners.")}
        assert ours == set(QUEUE_OF_TASK)  # a new task must say which queue carries it
        assert set(QUEUE_OF_TASK.values()) == set(ALL_QUEUES)
        for name, queue in QUEUE_OF_TASK.items():
            assert app.amqp.router.route({}, name)["queue"].name == queue, name
        for entry in settings.CELERY_BEAT_SCHEDULE.values():
            # A sweep that waited long is dropped: a later one does its work.
            expires = entry["options"]["expires"]
            assert expires == max(2 * entry["schedule"], 60), entry["task"]

    def test_no_code_uses_an_eta_or_countdown(self):
        # An ETA longer than the visibility timeout makes Redis redeliver forever.
        for path in list((ROOT / "gates").rglob("*.py")) + list((ROOT / "runners").rglob("*.py")):
            text = path.read_text()
            assert "countdown=" not in text and "eta=" not in text, path


class TestCompose:
    @pytest.fixture
    def compose(self) -> dict:
        return yaml.safe_load((ROOT / "docker-compose.yml").read_text())

    def test_it_has_web_workers_one_beat_postgres_and_redis(self, compose):
        services = compose["services"]
        assert set(services) == {"web", *WORKERS, "beat", "postgres", "redis"}
        assert services["beat"]["deploy"]["replicas"] == 1
        assert "celery -A config beat" in services["beat"]["command"]
        for name in WORKERS:
            assert "celery -A config worker" in services[name]["command"], name
        assert "gunicorn -c python:config.gunicorn config.wsgi" in services["web"]["command"]

    def test_every_service_has_a_health_check_except_beat(self, compose):
        for name, service in compose["services"].items():
            if name != "beat":
                assert "healthcheck" in service, name

    def test_every_queue_has_a_worker_and_each_worker_answers_its_own_ping(self, compose):
        consumed = []
        for name in WORKERS:
            service = compose["services"][name]
            queues = re.search(r"--queues (\S+)", service["command"]).group(1).split(",")
            node = re.search(r"--hostname (\S+)@%h", service["command"]).group(1)
            consumed += queues
            # `$$` is compose's escape: the container's shell expands $HOSTNAME.
            assert f"--destination {node}@$$HOSTNAME" in service["healthcheck"]["test"][1], name
        assert sorted(consumed) == sorted(ALL_QUEUES)  # each queue once, none left unconsumed

    def test_app_services_get_their_connections_from_the_environment(self, compose):
        for name in ("web", *WORKERS, "beat"):
            env = compose["services"][name]["environment"]
            assert env["DATABASE_URL"].startswith("postgres://")
            assert env["CELERY_BROKER_URL"].startswith("redis://")
            assert env["DEBUG"] == "false"
            assert compose["services"][name]["env_file"] == ".env"

    def test_the_worker_and_beat_are_restarted_when_they_exit(self, compose):
        for name in ("web", *WORKERS, "beat", "postgres", "redis"):
            assert compose["services"][name]["restart"] in {"unless-stopped", "always"}, name

    def test_the_worker_runs_without_gossip_and_mingle(self, compose):
        command = compose["services"]["worker"]["command"]
        assert "--without-gossip" in command and "--without-mingle" in command

    def test_redis_never_evicts_broker_keys(self, compose):
        assert "--maxmemory-policy noeviction" in compose["services"]["redis"]["command"]

    def test_env_example_names_every_secret_placeholder(self):
        example = (ROOT / ".env.example").read_text()
        for name in (
            "SECRET_KEY",
            "TOLLGATE_ENCRYPTION_KEYS",
            "POSTGRES_PASSWORD",
            "ALLOWED_HOSTS",
        ):
            assert f"{name}=" in example

    def test_the_dockerfile_runs_as_an_unprivileged_user_and_collects_static(self):
        dockerfile = (ROOT / "Dockerfile").read_text()
        assert "USER tollgate" in dockerfile
        assert "collectstatic" in dockerfile

    def test_the_image_holds_every_package_the_project_installs(self):
        """`pip install .` in the image finds only what was copied before it: a package left
        out (a new sub-domain package at the top) is an image whose worker cannot start."""
        dockerfile = (ROOT / "Dockerfile").read_text()
        before_install = dockerfile.split("RUN pip install .", 1)[0]
        include = re.search(r"include = \[(.*?)\]", (ROOT / "pyproject.toml").read_text())
        packages = re.findall(r'"(\w+)\*"', include.group(1))
        assert packages and "worker" in packages
        for package in packages:
            assert f"COPY {package} ./{package}" in before_install, package
