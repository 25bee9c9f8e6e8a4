"""The history pages (one gate's clauses across its attempts; one clause across every engagement
the viewer may see) and the compare view of two runs. HTTP only: tenancy, reads, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from gates import figures
from gates.history import reads
from gates.models import Gate
from gates.pages.history.panels import compare_arm_rows, compare_rows, history_panels
from gates.tenancy import get_visible_or_404, viewer_for_request


@login_required
@require_GET
def gate_history(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    cells = reads.gate_cells(gate)
    return render(
        request,
        "gates/history.html",
        {
            "gate": gate,
            "engagement": gate.engagement,
            "panels": history_panels(cells, with_engagement=False),
        },
    )


@login_required
@require_GET
def clause_history(request: HttpRequest) -> HttpResponse:
    viewer = viewer_for_request(request)
    clause, choices, cells = reads.visible_clause_cells(viewer, request.GET.get("clause", ""))
    return render(
        request,
        "gates/history_across.html",
        {
            "clause": clause,
            "choices": choices,
            "panels": history_panels(cells, with_engagement=True),
        },
    )


@login_required
@require_GET
def run_compare(request: HttpRequest, pk: int, other: int) -> HttpResponse:
    comparison = reads.visible_comparison(viewer_for_request(request), pk, other)
    return render(
        request,
        "gates/compare.html",
        {
            "comparison": comparison,
            "rows": compare_rows(comparison),
            "arm_rows": compare_arm_rows(comparison),
            "confidence": figures.share(comparison.confidence),
        },
    )
