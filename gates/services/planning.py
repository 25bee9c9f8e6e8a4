"""The KV planner's writes: its inputs saved to an engagement (Engagement.kv_plan), audited;
and the page's predicted TTFT band (TtftBandPrediction), asked for by digest and computed tier
by tier by a task (gates.planner.run_band, simhost's model) with done/total progress."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from gates.errors import NotAllowedError, ServiceError
from gates.models import Engagement, TtftBandPrediction
from gates.planner import PlannerError, plan, request_from_dict
from gates.planner.run_band import (
    BandInputs,
    BandRefusedError,
    band_inputs_from_dict,
    band_inputs_to_dict,
    predict_tier,
)
from gates.services import pokes
from gates.services.audit import Actor, audit_record
from gates.services.worklist import worklist_claim, worklist_stale
from gates.tenancy import Viewer

# Planner inputs shape the G3 contract, so the people who may edit specs may save them.
SAVE_ACTION = "spec.edit"
# A claim is renewed after every tier (a minute at most at the form's limits): older is a
# killed worker's, and the sweep's poke takes it over.
STALE_BAND_CLAIM = timedelta(minutes=5)
# Bands computing at once, all users together: past this a new one is refused, so a form
# submitted in a loop cannot fill the evidence queue that characterises traces.
MAX_BANDS_COMPUTING = 20


def engagement_kv_plan_save(
    *, actor: Actor, viewer: Viewer, engagement: Engagement, inputs: Mapping[str, Any]
) -> Engagement:
    """Store validated planner inputs (request_from_dict's fields) as the engagement's kv_plan."""
    if not viewer.can(SAVE_ACTION):
        raise NotAllowedError("only vendor engineers and admins may save planner inputs")
    cleaned = {name: value for name, value in inputs.items() if value is not None}
    try:
        plan(request_from_dict(cleaned))  # plan() refuses a few inputs the parser lets by
    except PlannerError as error:
        raise ServiceError(error.message, field=error.field) from None
    with transaction.atomic():
        locked = Engagement.objects.select_for_update().get(pk=engagement.pk)
        previous = locked.kv_plan
        locked.kv_plan = cleaned
        locked.save(update_fields=["kv_plan"])
        audit_record(
            actor=actor,
            action="engagement.kv_plan_save",
            target=locked,
            organization_id=locked.organization_id,
            detail={"before": audit_summary(previous), "after": audit_summary(cleaned)},
        )
    engagement.kv_plan = cleaned
    return engagement


def audit_summary(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs for the audit trail; a pasted config.json is kept as its SHA-256 only."""
    summary = dict(inputs)
    if "config" in summary:
        canonical = json.dumps(summary["config"], sort_keys=True, separators=(",", ":"))
        summary["config"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return summary


def ttft_band_request(inputs: BandInputs) -> TtftBandPrediction:
    """The band for these inputs: the stored one (computed or computing), else a new row whose
    computation is poked. Same inputs, same row: a second user gets the first one's answer."""
    document = band_inputs_to_dict(inputs)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    found = TtftBandPrediction.objects.filter(digest=digest).first()
    if found is not None:
        return found
    computing = TtftBandPrediction.objects.filter(state=TtftBandPrediction.State.COMPUTING)
    if computing.count() >= MAX_BANDS_COMPUTING:
        raise ServiceError(
            f"{MAX_BANDS_COMPUTING} TTFT bands are being computed: ask again in a few minutes",
            field="gpu_kind",
        )
    try:
        with transaction.atomic():
            prediction = TtftBandPrediction.objects.create(
                digest=digest, inputs=document, progress_total=len(inputs.tiers)
            )
            pokes.poke_on_commit(pokes.PREDICT_PLANNER_TTFT, prediction.pk)
    except IntegrityError:  # the same inputs asked for at the same moment
        return TtftBandPrediction.objects.get(digest=digest)
    return prediction


def ttft_band_claim(prediction_id: int) -> bool:
    """Take the computation up; False when it is done or another worker holds it."""
    computing = TtftBandPrediction.objects.filter(state=TtftBandPrediction.State.COMPUTING)
    return worklist_claim(computing, prediction_id, STALE_BAND_CLAIM)


def ttft_band_compute(prediction_id: int) -> None:
    """Compute a claimed band tier by tier, storing each as it comes (a worker killed midway
    loses one tier, not all); a model that refuses records why."""
    prediction = TtftBandPrediction.objects.get(pk=prediction_id)
    inputs = band_inputs_from_dict(prediction.inputs)
    tiers = list(prediction.tiers)
    done = {tier["concurrency"] for tier in tiers}
    for concurrency in inputs.tiers:
        if concurrency in done:
            continue
        try:
            tiers.append(predict_tier(inputs, concurrency))
        except BandRefusedError as error:
            _band_finish(prediction_id, state=TtftBandPrediction.State.FAILED, error=str(error))
            return
        _band_computing(prediction_id).update(
            tiers=tiers, progress_done=len(tiers), claimed_at=timezone.now()
        )
    _band_finish(prediction_id, state=TtftBandPrediction.State.READY)


def ttft_bands_to_compute() -> list[int]:
    """Bands still computing with no live claim (a lost poke, a killed worker)."""
    computing = TtftBandPrediction.objects.filter(state=TtftBandPrediction.State.COMPUTING)
    return worklist_stale(computing, STALE_BAND_CLAIM)


def ttft_bands_prune(*, keep_days: int, now: datetime | None = None) -> int:
    """Delete bands asked for more than `keep_days` ago that are done (ready or failed): one
    row per digest of inputs would otherwise pile up forever. A band still computing stays,
    so a page polling it never loses it mid-way; asked again later, a band is recomputed.
    Returns how many rows went."""
    cutoff = (now or timezone.now()) - timedelta(days=keep_days)
    done = TtftBandPrediction.objects.exclude(state=TtftBandPrediction.State.COMPUTING)
    deleted, _ = done.filter(created_at__lt=cutoff).delete()
    return deleted


def _band_computing(prediction_id: int) -> Any:
    return TtftBandPrediction.objects.filter(
        pk=prediction_id, state=TtftBandPrediction.State.COMPUTING
    )


def _band_finish(prediction_id: int, **fields: object) -> None:
    _band_computing(prediction_id).update(**fields)
