"""Tasks keep their database connection as requests do (config/celery.py): a sound one is kept
from task to task, a broken or expired one is closed, and an eager task, which runs inside its
caller's transaction, never closes it. Real PostgreSQL."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from django.db import connection, transaction

from config.celery import _close_old_connections

WORKER_TASK = SimpleNamespace(request=SimpleNamespace(is_eager=False))
EAGER_TASK = SimpleNamespace(request=SimpleNamespace(is_eager=True))


@pytest.fixture
def kept_connections(settings):
    connection.ensure_connection()
    connection.close_at = time.monotonic() + 60  # CONN_MAX_AGE 60, as in production
    yield
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_sound_connection_is_kept_for_the_next_task(kept_connections):
    before = connection.connection
    _close_old_connections(task=WORKER_TASK)
    assert connection.connection is before is not None


@pytest.mark.django_db(transaction=True)
def test_an_expired_connection_is_closed_after_a_task(kept_connections):
    connection.close_at = time.monotonic() - 1
    _close_old_connections(task=WORKER_TASK)
    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_an_eager_task_leaves_its_callers_transaction_open(kept_connections):
    with transaction.atomic():
        before = connection.connection
        _close_old_connections(task=EAGER_TASK)
        assert connection.connection is before and connection.in_atomic_block
