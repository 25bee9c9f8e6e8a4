"""The KV planner page: plan from a form (preset or config.json), prefill from an engagement,
save the inputs to it. HTTP only: tenancy for lookups, gates.planner to plan, a service to save.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from gates import services
from gates.errors import ServiceError
from gates.inputs import id_input
from gates.models import Engagement
from gates.pages.planner.forms import DEFAULTS, PlannerForm, form_data_from_inputs
from gates.planner import GIB, PlanResult
from gates.planner.charts import kv_fit_heatmap
from gates.planner.spec_check import engagement_plan_inputs
from gates.services.planning import SAVE_ACTION
from gates.tenancy import Viewer, get_visible_or_404, viewer_for_request

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
    else:
        form = _initial_form(engagement)
    return _render(request, form, engagement, viewer)


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
) -> HttpResponse:
    context: dict[str, Any] = {
        "form": form,
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
        )
    return render(request, "gates/planner.html", context, status=status)


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
