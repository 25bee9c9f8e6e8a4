"""The KV planner page: plan from a form (preset or config.json), prefill from an engagement,
save the inputs to it, and ask for the predicted TTFT band (a task computes it; the page shows
its progress and polls it). HTTP only: tenancy for lookups, gates.planner to plan, services to
write."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from gates import services
from gates.charts.band import ttft_band_figure
from gates.errors import ServiceError
from gates.inputs import id_input
from gates.models import Engagement, TtftBandPrediction
from gates.pages.planner.forms import (
    BAND_DEFAULTS,
    DEFAULTS,
    PlannerForm,
    TtftBandForm,
    form_data_from_inputs,
)
from gates.planner import GIB, PlanResult
from gates.planner.charts import kv_fit_heatmap
from gates.planner.run_band import (
    assumptions_text,
    band_inputs_from_dict,
    band_text,
    planner_band_inputs,
)
from gates.planner.spec_check import engagement_plan_inputs
from gates.services.planning import SAVE_ACTION
from gates.tenancy import Viewer, get_visible_or_404, viewer_for_request

BAND_PREFIX = "band"
RECOMMENDATION_LABELS = {
    "keep_resident": "Keep KV resident",
    "offload_worth_testing": "Offload is worth a joint test",
    "offload_will_not_help": "Offload will not help",
}


@login_required
@require_http_methods(["GET", "POST"])
def planner_page(request: HttpRequest) -> HttpResponse:
    viewer = viewer_for_request(request)
    engagement = _engagement_in_query(request, viewer)
    if request.method == "POST":
        form = PlannerForm(request.POST, request.FILES)
        band_form = TtftBandForm(request.POST, prefix=BAND_PREFIX)
    else:
        form = _initial_form(engagement)
        band_form = TtftBandForm(initial=BAND_DEFAULTS, prefix=BAND_PREFIX)
    return _render(request, form, engagement, viewer, band_form=band_form)


@login_required
@require_http_methods(["GET"])
def planner_ttft_band(request: HttpRequest) -> HttpResponse:
    """One TTFT band by its inputs' digest (?digest=): a page to reload, or (&part=section) the
    section the planner page polls until it is computed. The digest is only known to whoever
    has the inputs, so the band is no organization's secret."""
    digest = request.GET.get("digest", "")
    prediction = get_object_or_404(TtftBandPrediction, digest=digest[:64])
    context = {"band": band_readout(prediction)}
    if request.GET.get("part") == "section":
        return render(request, "gates/_planner_ttft.html", context)
    return render(request, "gates/planner_ttft.html", context)


@login_required
@require_POST
def planner_save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the form's inputs as the engagement's planner inputs (vendor engineers and admins)."""
    viewer = viewer_for_request(request)
    engagement = get_visible_or_404(Engagement, viewer, pk=pk)
    form = PlannerForm(request.POST, request.FILES)
    if not form.is_valid():
        return _render(request, form, engagement, viewer, status=400)
    try:
        services.engagement_kv_plan_save(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            engagement=engagement,
            inputs=form.planner_inputs,
        )
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"Planner inputs saved to “{engagement.title}”.")
    return redirect(f"{reverse('gates:planner')}?engagement={engagement.pk}")


def _engagement_in_query(request: HttpRequest, viewer: Viewer) -> Engagement | None:
    pk = id_input(request.GET, "engagement")
    return get_visible_or_404(Engagement, viewer, pk=pk) if pk is not None else None


def _initial_form(engagement: Engagement | None) -> PlannerForm:
    """Saved inputs plan at once (a bound form); else defaults, with the engagement's preset."""
    if engagement is not None and engagement.kv_plan:
        return PlannerForm(data=form_data_from_inputs(engagement.kv_plan))
    inputs = engagement_plan_inputs(engagement) if engagement is not None else {}
    return PlannerForm(initial={**DEFAULTS, **inputs})


def _render(
    request: HttpRequest,
    form: PlannerForm,
    engagement: Engagement | None,
    viewer: Viewer,
    status: int = 200,
    band_form: TtftBandForm | None = None,
) -> HttpResponse:
    band_form = band_form or TtftBandForm(initial=BAND_DEFAULTS, prefix=BAND_PREFIX)
    context: dict[str, Any] = {
        "form": form,
        "band_form": band_form,
        "engagement": engagement,
        "can_save": engagement is not None and viewer.can(SAVE_ACTION),
        "saved": bool(engagement and engagement.kv_plan),
    }
    if form.is_bound and form.is_valid():
        result, plan_request = form.plan_result, form.plan_request
        # A valid form has planned: its clean() sets both or adds an error.
        assert result is not None and plan_request is not None
        context.update(
            result=result,
            recommendation=RECOMMENDATION_LABELS[result.recommendation],
            rows=plan_rows(result),
            figure=kv_fit_heatmap(plan_request),
            band=_band(form, band_form),
        )
    return render(request, "gates/planner.html", context, status=status)


def _band(form: PlannerForm, band_form: TtftBandForm) -> dict[str, Any] | None:
    """The band asked for with a planned form: its readout, or why there is none."""
    if not band_form.is_bound or not band_form.is_valid() or band_form.workload is None:
        return None
    assert form.plan_request is not None and form.plan_result is not None  # planned
    inputs = planner_band_inputs(
        form.plan_request,
        form.plan_result,
        band_form.cleaned_data["gpu_kind"],
        band_form.workload,
        band_form.concurrencies,
    )
    if isinstance(inputs, str):
        return {"state": "unknown", "reason": inputs}
    try:
        prediction = services.ttft_band_request(inputs)
    except ServiceError as error:
        return {"state": "unknown", "reason": error.detail}
    return band_readout(prediction)


def band_readout(prediction: TtftBandPrediction) -> dict[str, Any]:
    """What the band section shows: state, done/total tiers, each tier's band in words and the
    chart of the tiers done so far."""
    tiers = sorted(prediction.tiers, key=lambda tier: tier["concurrency"])
    return {
        "state": prediction.state,
        "digest": prediction.digest,
        "done": prediction.progress_done,
        "total": prediction.progress_total,
        "tiers": [{**tier, "band_text": band_text(tier)} for tier in tiers],
        "figure": ttft_band_figure(tiers) if tiers else None,
        "assumes": assumptions_text(band_inputs_from_dict(prediction.inputs)),
        "reason": prediction.error,
    }


def plan_rows(result: PlanResult) -> list[tuple[str, str]]:
    """The plan's numbers as (label, value) rows for the page."""
    gpus, boundary = result.gpus, result.boundary
    max_context = boundary.max_context_at_concurrency
    return [
        ("Model", f"{result.model}, KV in {result.kv_dtype}"),
        ("GPUs", f"{gpus}: {result.replicas} x tensor parallel {result.tensor_parallel_size}"),
        ("KV per token", f"{result.kv_bytes_per_token:,} bytes"),
        ("KV per token per GPU", f"{result.kv_bytes_per_token_per_gpu:,} bytes"),
        ("Weights per GPU", _gib(result.weight_bytes_per_gpu)),
        ("KV capacity", _per_gpu_and_total(result.kv_capacity_per_gpu_bytes, gpus)),
        ("KV demand", _per_gpu_and_total(result.kv_demand_per_gpu_bytes, gpus)),
        ("Fits", "yes" if result.fits else "no"),
        ("Headroom", _per_gpu_and_total(result.headroom_bytes // gpus, gpus)),
        ("Spills out of VRAM", f"{result.spill_fraction:.1%} of the working set"),
        ("Offload tier needed", _gib(result.offload_capacity_needed_bytes)),
        ("Max concurrency", f"{boundary.max_concurrency_at_context:,} at this context"),
        ("Max context", "any" if max_context is None else f"{max_context:,} tokens at this load"),
        ("Prefill reuse", f"{result.prefill_saving_share:.1%}"),
        ("  kept by VRAM", f"{result.resident_saving_share:.1%}"),
        ("  only by offload", f"{result.offload_saving_share:.1%}"),
    ]


def _per_gpu_and_total(per_gpu: int, gpus: int) -> str:
    return f"{_gib(per_gpu)} per GPU, {_gib(per_gpu * gpus)} in all"


def _gib(value: int) -> str:
    return f"{value / GIB:,.1f} GiB"
