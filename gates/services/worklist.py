"""Rows a worker takes up by claim: a trace to characterise, a report PDF to render, a planner
band to compute. A task claims its row by id (a redelivered poke finds it claimed or done); a
claim older than its stale limit is a killed worker's, so the beat's sweep pokes the row again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone


def worklist_claim(waiting: QuerySet, row_id: int, stale: timedelta, **reset: Any) -> bool:
    """Claim row `row_id` of the `waiting` rows unless a live claim holds it; `reset` fields are
    written with the claim (a restarted characterisation's progress). False: done or held."""
    now = timezone.now()
    unclaimed = waiting.filter(pk=row_id).exclude(claimed_at__gt=now - stale)
    return unclaimed.update(claimed_at=now, **reset) == 1


def worklist_stale(waiting: QuerySet, stale: timedelta) -> list[int]:
    """The `waiting` rows with no live claim (a lost poke, a killed worker): the sweep's ids."""
    fresh = timezone.now() - stale
    return list(waiting.exclude(claimed_at__gt=fresh).values_list("pk", flat=True))
