"""The trace pages: upload a trace into an engagement (a form on its page), and one trace's
characterisation with the planner's prediction per tier. HTTP only: tenancy for lookups, the
service to store, gates.selectors for the readout, gates.charts.traces for the pictures."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from gates import selectors, services
from gates.charts.traces import arrival_rate_figure, hit_curve_figure, reuse_cdf_figure
from gates.errors import ServiceError
from gates.history.trace_points import trace_measured_points
from gates.models import Engagement, WorkloadTrace
from gates.tenancy import get_visible_or_404, viewer_for_request
from runners.traces.readers.formats import FORMATS


class TraceUploadForm(forms.Form):
    file = forms.FileField(label="Trace file")
    format = forms.ChoiceField(choices=[(name, name) for name in sorted(FORMATS)])
    block_tokens = forms.IntegerField(
        min_value=1, max_value=1_000_000, required=False, help_text="Left out: the format's."
    )


class TierForm(forms.Form):
    dram_gib = forms.FloatField(min_value=0, required=False, label="DRAM tier (GiB)")
    ssd_gib = forms.FloatField(min_value=0, required=False, label="SSD tier (GiB)")
    link_gbps = forms.FloatField(min_value=0.001, required=False, label="host link per GPU (GB/s)")
    ssd_gbps = forms.FloatField(min_value=0.001, required=False, label="SSD read (GB/s)")
    prefill_tokens_per_s = forms.FloatField(
        min_value=1, required=False, label="prefill rate (tokens/s)"
    )


@login_required
@require_POST
def trace_upload(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    engagement = get_visible_or_404(Engagement, viewer, pk=pk)
    form = TraceUploadForm(request.POST, request.FILES)
    back = reverse("gates:engagement-detail", args=[engagement.pk]) + "#traces"
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect(back)
    upload = form.cleaned_data["file"]
    try:
        trace = services.trace_upload(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            engagement=engagement,
            name=upload.name,
            content=upload.read(),
            trace_format=form.cleaned_data["format"],
            block_tokens=form.cleaned_data["block_tokens"],
        )
    except ServiceError as error:
        messages.error(request, f"{upload.name} was not stored: {error.detail}")
        return redirect(back)
    messages.success(request, f"{trace.name} stored (sha256 {trace.sha256[:12]}…).")
    return redirect("gates:trace-detail", pk=trace.pk)


@login_required
@require_GET
def trace_detail(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    queryset = WorkloadTrace.objects.defer("content").select_related("engagement")
    trace = get_visible_or_404(queryset, viewer, pk=pk)
    tier_form = TierForm(request.GET or None)
    tiers = tier_form.cleaned_data if tier_form.is_valid() else {}
    readout = selectors.trace_readout(trace, tiers)
    readout["measured"] = trace_measured_points(trace, viewer)
    readout["spec_reference_json"] = json.dumps(readout["spec_reference"])
    if (profile := readout.get("profile")) and profile.get("prefix_information"):
        readout["ceiling_pct"] = f"{profile['infinite_cache_hit_ratio']:.1%}"
    return render(
        request,
        "gates/trace_detail.html",
        {
            "trace": trace,
            "engagement": trace.engagement,
            "readout": readout,
            "tier_form": tier_form,
            "figures": _figures(readout),
        },
    )


def _figures(readout: dict) -> dict:
    profile = readout.get("profile")
    if not profile:
        return {}
    tiers = (readout.get("prediction") or {}).get("tiers", [])
    figures = {"arrivals": arrival_rate_figure(profile)} if profile.get("arrivals") else {}
    if profile.get("prefix_information"):
        measured = (readout.get("measured") or {}).get("points", [])
        figures["curve"] = hit_curve_figure(profile, tiers, measured)
        figures["reuse"] = reuse_cdf_figure(profile)
    return figures
