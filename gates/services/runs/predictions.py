"""A G3 run's predicted TTFT-saving band, recorded once when the run is planned: the spec's
workload on the host's accepted inventory, through gates.planner.run_band (simhost's model).
The only writer of Run.predicted_ttft."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from gates.models import Engagement, Run, RunStep
from gates.planner import (
    PlannerError,
    PlanRequest,
    preset_for_model_name,
    preset_model,
    request_from_dict,
)
from gates.planner import plan as kv_plan
from gates.planner.architectures import ModelArch
from gates.planner.run_band import band_inputs, predict_run_band
from gates.services.contract.inventory import accepted_inventory
from runners.adapters.cache_config import gpu_kv_cache_tokens

logger = logging.getLogger(__name__)

# Serve steps of earlier runs looked at for the KV cache size a server reported.
RECENT_STEPS = 200
# The sweep pokes a run whose poke was lost once this long has passed (a poked one is being
# predicted, up to a minute), and gives up on runs older than PREDICT_WITHIN.
PREDICT_AFTER = timedelta(minutes=5)
PREDICT_WITHIN = timedelta(days=2)


def run_ttft_prediction_record(*, run_id: int) -> dict | None:
    """Predict and store the band of a G3 run that has none yet (a second call does nothing).
    A prediction is advice beside the run: a model that fails records why, never fails it."""
    run = Run.objects.select_related("gate__engagement", "spec").filter(pk=run_id).first()
    if run is None or run.gate.kind != "G3" or run.predicted_ttft is not None:
        return run and run.predicted_ttft
    try:
        prediction = _predict(run)
    except Exception:  # the advice must not take the worker down with it; the log says why
        logger.exception("run %s: TTFT band not predicted", run_id)
        prediction = {"predicted": None, "reason": "the performance model failed (worker log)"}
    Run.objects.filter(pk=run.pk, predicted_ttft__isnull=True).update(predicted_ttft=prediction)
    return prediction


def runs_to_predict() -> list[int]:
    """G3 runs still without a band whose poke was lost: the beat sweep pokes them again."""
    now = timezone.now()
    waiting = Run.objects.filter(
        gate__kind="G3",
        predicted_ttft__isnull=True,
        created_at__lt=now - PREDICT_AFTER,
        created_at__gt=now - PREDICT_WITHIN,
    )
    return list(waiting.values_list("pk", flat=True))


def _predict(run: Run) -> dict:
    engagement = run.gate.engagement
    model, kv_tokens, kv_source = run_model_and_kv(engagement, run)
    inputs = band_inputs(
        run.spec.document, accepted_inventory(engagement), model, kv_tokens, kv_source
    )
    return predict_run_band(inputs)


def run_model_and_kv(engagement: Engagement, run: Run) -> tuple[ModelArch | None, int | None, str]:
    """The model and the GPU KV cache size in tokens: what a server of this engagement reported
    on this host wins; else the planner's capacity from the saved inputs."""
    plan = _saved_plan(engagement)
    model = plan.deployment.model if plan else _preset_model(engagement.model_name)
    reported = server_reported_kv_tokens(engagement, run)
    if reported is not None:
        return model, reported[0], f"as the server reported it in run #{reported[1]}"
    if plan is None:
        return model, None, ""
    try:
        result = kv_plan(plan)
    except PlannerError:
        return model, None, ""
    if result.replicas != 1:  # the model runs one server; several replicas are not modelled
        return model, None, ""
    tokens = result.kv_capacity_per_gpu_bytes // result.kv_bytes_per_token_per_gpu
    return model, tokens, "the KV planner's capacity from the engagement's saved inputs"


def _saved_plan(engagement: Engagement) -> PlanRequest | None:
    try:
        return request_from_dict(engagement.kv_plan) if engagement.kv_plan else None
    except PlannerError:
        return None


def _preset_model(model_name: str) -> ModelArch | None:
    preset = preset_for_model_name(model_name or "")
    return preset_model(preset) if preset else None


def server_reported_kv_tokens(engagement: Engagement, run: Run) -> tuple[int, int] | None:
    """(tokens, run id): the GPU KV cache size the newest server of this engagement on this
    host reported at start (vllm:cache_config_info), or None."""
    steps = RunStep.objects.filter(run__gate__engagement=engagement, run__host_id=run.host_id)
    for run_id, detail in steps.order_by("-run_id", "-position").values_list("run_id", "detail")[
        :RECENT_STEPS
    ]:
        tokens = gpu_kv_cache_tokens((detail or {}).get("progress", {}).get("cache_config"))
        if tokens:
            return tokens, run_id
    return None
