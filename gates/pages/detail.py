"""The read pages: the engagement list, an engagement, a gate and a run. HTTP only: look up
through tenancy, gather what the page shows, render."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from gates.history.reads import decided_attempts_before
from gates.models import Decision, Engagement, Gate, Host, Run, Soak
from gates.pages import dashboards, runs
from gates.pages.contract import gate_contract
from gates.pages.engagement import engagement_overview
from gates.pages.evidence import evidence_brief
from gates.pages.hosts.inventory import engagement_inventory, run_can_amend_inventory
from gates.pages.overview import gate_label, gate_summary, gate_tone, next_action, run_summary
from gates.pages.soak import view as soakview
from gates.pages.statistics import g3_statistics
from gates.planner.spec_check import spec_kv_warning
from gates.selectors import (
    clause_rows,
    engagement_last_host_id,
    gate_clauses,
    gate_replay_bands,
    run_predicted_ttft,
)
from gates.services.contract.power import spec_acknowledgement_line
from gates.services.runs.attempts import run_spent_attempt
from gates.tenancy import get_visible_or_404, viewer_for_request, visible
from runners.program.sequence import has_program
from runners.traces.readers.formats import FORMATS


@login_required
@require_GET
def engagement_list(request: HttpRequest) -> HttpResponse:
    viewer = viewer_for_request(request)
    state = request.GET.get("state", "")
    engagements = visible(Engagement, viewer).select_related("organization")
    if state in Engagement.State.values:
        engagements = engagements.filter(state=state)
    # A page of them, with the count: three queries whatever the count
    # (tests/gates/pages/test_page_queries.py); links made from one reversed pattern each,
    # as 2,500 {% url %} tags were half the page's time.
    page = list_page(request, engagements.prefetch_related("gates"))
    gate_href, engagement_href = _href("gates:gate-detail"), _href("gates:engagement-detail")
    rows = [
        {
            "engagement": engagement,
            "href": engagement_href(engagement.pk),
            "gates": [
                (gate, gate_label(gate), gate_tone(gate), gate_href(gate.pk))
                for gate in engagement.gates.all()
            ],
            "next": next_action(engagement.state, engagement.gates.all()),
        }
        for engagement in page
    ]
    return render(
        request,
        "gates/engagement_list.html",
        {
            "rows": rows,
            "page": page,
            "viewer": viewer,
            "can_create": viewer.can("engagement.create"),
            "state": state,
            "states": Engagement.State.values,
        },
    )


_PK_SENTINEL = 987654321
# Rows per page of every list page (engagements, a gate's runs, hosts, tokens, the library).
LIST_PAGE_SIZE = 50


def list_page(request: HttpRequest, rows) -> Page:
    """The `?page=` page of an ordered queryset; garbage is the first page, past the end the
    last (Paginator.get_page), never a 404 or a 500."""
    return Paginator(rows, LIST_PAGE_SIZE).get_page(request.GET.get("page"))


def _gate_runs_page(request: HttpRequest, gate: Gate) -> Page:
    """A page of the gate's runs, newest first, narrowed to `?run_state=` when given."""
    runs = gate.runs.select_related("host", "spec").defer("log")
    state = request.GET.get("run_state", "")
    if state in Run.State.values:
        runs = runs.filter(state=state)
    return list_page(request, runs)


def _href(name: str):
    """pk -> the URL of route `name` (one `pk` argument), reversed once."""
    pattern = reverse(name, args=[_PK_SENTINEL])
    return lambda pk: pattern.replace(str(_PK_SENTINEL), str(pk))


@login_required
@require_GET
def engagement_detail(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    engagement = get_visible_or_404(
        Engagement.objects.select_related("organization"), viewer, pk=pk
    )
    return render(
        request,
        "gates/engagement_detail.html",
        {
            "engagement": engagement,
            "viewer": viewer,
            **engagement_overview(engagement),
            "inventory": engagement_inventory(engagement, viewer),
            "traces": engagement.traces.defer("content", "profile"),
            "can_upload_trace": viewer.can("trace.upload"),
            "trace_formats": sorted(FORMATS),
        },
    )


@login_required
@require_GET
def gate_detail(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    spec = gate.current_spec
    hosts = visible(Host, viewer).filter(organization_id=gate.engagement.organization_id)
    kv_warning = spec_kv_warning(gate.engagement, spec.document) if gate.kind == "G3" else ""
    clauses = gate_clauses(gate)
    can_review = viewer.can("gate.review") and gate.stop_loss_review
    return render(
        request,
        "gates/gate_detail.html",
        {
            "kv_warning": kv_warning,
            "gate": gate,
            "engagement": gate.engagement,
            "spec": spec,
            "viewer": viewer,
            "spec_json": json.dumps(spec.document, indent=2) if spec else "",
            "runs": _gate_runs_page(request, gate),
            "run_state": request.GET.get("run_state", ""),
            "run_states": Run.State.values,
            "decisions": gate.decisions.select_related("decided_by", "spec")[:20],
            "clauses": clauses,
            "replay_bands": gate_replay_bands(gate),
            "replay_ttft_bands": gate_replay_bands(gate, "replay_ttft_bands"),
            "replay_ttft_changes": gate_replay_bands(gate, "replay_ttft_changes"),
            "summary": gate_summary(gate, clauses),
            "hosts": hosts,
            "default_host_id": engagement_last_host_id(gate.engagement),
            "runnable": has_program(gate.kind),
            "can_start": viewer.can("run.start")
            and has_program(gate.kind)
            and gate.can_move_to(Gate.State.RUNNING)
            and gate.state != Gate.State.RUNNING
            and hosts.exists(),
            "can_review": can_review,
            "acknowledged": spec_acknowledgement_line(spec) if can_review else "",
            "can_edit_spec": viewer.can("spec.edit"),
            "dashboard": dashboards.gate_dashboard(gate),
            "statistics": g3_statistics(gate),
            "contract": gate_contract(gate, spec, viewer),
            "evidence": evidence_brief(gate),
        },
    )


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    run = get_visible_or_404(
        Run.objects.select_related("gate__engagement", "host", "spec"), viewer, pk=pk
    )
    soak = Soak.objects.filter(run=run).first()
    decision = run.decisions.filter(kind=Decision.Kind.ENGINE).first()
    summary = run_summary(
        run.gate,
        state=run.state,
        outcome=run.outcome,
        reason=run.reason,
        verdict=decision.verdict if decision else None,
        clauses=clause_rows(decision.clauses) if decision else [],
    )
    predicted_ttft = run_predicted_ttft(run)
    return render(
        request,
        "gates/run_detail.html",
        {
            "run": run,
            "gate": run.gate,
            "engagement": run.gate.engagement,
            "viewer": viewer,
            "steps": runs.run_steps(run),
            "files": runs.run_files(run),
            "log": runs.run_log_window(run),
            "decision": decision,
            "summary": summary,
            "stalled": runs.run_stall(
                run, timezone.now(), settings.TOLLGATE_RUN_STALE_AFTER_S, soak=soak is not None
            ),
            "can_cancel": viewer.can("run.cancel") and not run.is_ended,
            "spent_attempt": (run_spent_attempt(run) if run.gate.kind == Gate.Kind.G3 else None),
            "soak": soak,
            "can_control_soak": bool(soak)
            and viewer.can("soak.control")
            and soak.state == "active",
            "figures": dashboards.run_panels(run),
            "compare_with": decided_attempts_before(run) if decision else [],
            "replay_fidelity": runs.run_replay_fidelity(run),
            "predicted_ttft": predicted_ttft,
            "predicted_ttft_figure": dashboards.predicted_ttft_figure(predicted_ttft),
            "soak_page": soakview.soak_page(run, soak),
            "can_amend_inventory": run_can_amend_inventory(run, viewer),
        },
    )
