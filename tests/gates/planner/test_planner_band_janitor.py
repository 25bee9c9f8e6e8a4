"""The janitor deletes the planner's finished TTFT bands past their keep (one row per digest of
inputs would pile up for ever) and leaves recent ones and those still computing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from gates.models import TtftBandPrediction
from worker import tasks

pytestmark = pytest.mark.django_db
State = TtftBandPrediction.State


def band(name: str, state: str, age_days: float) -> TtftBandPrediction:
    return TtftBandPrediction.objects.create(
        digest=name.ljust(64, "0"),
        inputs={},
        state=state,
        progress_total=1,
        created_at=timezone.now() - timedelta(days=age_days),
    )


def kept() -> set[str]:
    return {
        digest.rstrip("0") for digest in TtftBandPrediction.objects.values_list("digest", flat=True)
    }


def test_the_janitor_deletes_finished_bands_past_their_keep_and_keeps_the_rest(settings):
    settings.TOLLGATE_PLANNER_BAND_KEEP_DAYS = 30
    band("a", State.READY, 31)
    band("b", State.FAILED, 45)
    band("c", State.READY, 29)
    band("d", State.COMPUTING, 90)  # in progress: a page may be polling it
    band("e", State.FAILED, 1)

    tasks.prune_soaks()

    assert kept() == {"c", "d", "e"}


def test_the_keep_comes_from_the_setting(settings):
    settings.TOLLGATE_PLANNER_BAND_KEEP_DAYS = 2
    band("a", State.READY, 3)
    band("b", State.READY, 1)

    tasks.prune_soaks()
    tasks.prune_soaks()  # run twice: nothing more to do, nothing else goes

    assert kept() == {"b"}
