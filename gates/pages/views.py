"""Server-rendered pages. HTTP only: look up through tenancy, call a service, render."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from gates import services
from gates.errors import ServiceError
from gates.healthz import service_health
from gates.models import Decision, Engagement, Gate, Host, Run, Soak
from gates.pages import dashboards, runs
from gates.pages.contract import gate_contract
from gates.pages.engagement import engagement_overview
from gates.pages.evidence import evidence_brief
from gates.pages.hosts.inventory import engagement_inventory, run_can_amend_inventory
from gates.pages.overview import gate_label, gate_tone, next_action
from gates.pages.soak import view as soakview
from gates.pages.statistics import g3_statistics
from gates.planner.spec_check import spec_kv_warning
from gates.selectors import engagement_last_host_id, gate_clauses
from gates.tenancy import get_visible_or_404, viewer_for_request, visible
from runners.program.sequence import has_program


@login_required
@require_GET
def engagement_list(request: HttpRequest) -> HttpResponse:
    viewer = viewer_for_request(request)
    engagements = visible(Engagement, viewer).select_related("organization")
    # Two queries whatever the count (tests/gates/pages/test_page_queries.py); links made
    # from one reversed pattern each, as 2,500 {% url %} tags were half the page's time.
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
        for engagement in engagements.prefetch_related("gates")
    ]
    return render(request, "gates/engagement_list.html", {"rows": rows, "viewer": viewer})


_PK_SENTINEL = 987654321


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
            "runs": gate.runs.select_related("host", "spec")[:50],
            "decisions": gate.decisions.select_related("decided_by", "spec")[:20],
            "clauses": gate_clauses(gate),
            "hosts": hosts,
            "default_host_id": engagement_last_host_id(gate.engagement),
            "runnable": has_program(gate.kind),
            "can_start": viewer.can("run.start")
            and has_program(gate.kind)
            and gate.can_move_to(Gate.State.RUNNING)
            and gate.state != Gate.State.RUNNING
            and hosts.exists(),
            "can_review": viewer.can("gate.review") and gate.stop_loss_review,
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
            "decision": run.decisions.filter(kind=Decision.Kind.ENGINE).first(),
            "can_cancel": viewer.can("run.cancel") and not run.is_ended,
            "soak": soak,
            "can_control_soak": bool(soak)
            and viewer.can("soak.control")
            and soak.state == "active",
            "figures": dashboards.run_panels(run),
            "soak_page": soakview.soak_page(run, soak),
            "can_amend_inventory": run_can_amend_inventory(run, viewer),
        },
    )


class RunStartForm(forms.Form):
    host = forms.ModelChoiceField(
        queryset=Host.objects.none(),
        error_messages=dict.fromkeys(("required", "invalid_choice"), "choose one of the hosts"),
    )

    def __init__(self, data, *, hosts) -> None:
        super().__init__(data)
        self.fields["host"].queryset = hosts


@login_required
@require_POST
def run_start(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    hosts = visible(Host, viewer).filter(organization_id=gate.engagement.organization_id)
    form = RunStartForm(request.POST, hosts=hosts)
    if not form.is_valid():
        messages.error(request, f"host: {form.errors['host'][0]}")
        return redirect("gates:gate-detail", pk=gate.pk)
    try:
        run = services.run_create(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            gate=gate,
            host=form.cleaned_data["host"],
        )
    except ServiceError as error:
        messages.error(request, error.detail)
        return redirect("gates:gate-detail", pk=gate.pk)
    return redirect("gates:run-detail", pk=run.pk)


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    run = get_visible_or_404(Run, viewer, pk=pk)
    try:
        services.run_cancel(actor=services.Actor.from_request(request), viewer=viewer, run=run)
        messages.info(request, "Cancel requested; the worker stops the host's processes.")
    except ServiceError as error:
        messages.error(request, error.detail)
    return redirect("gates:run-detail", pk=run.pk)


@login_required
@require_POST
def soak_control(request: HttpRequest, pk: int) -> HttpResponse:
    """Stop a soak early, or extend it by N hours (both audited by the service)."""
    viewer = viewer_for_request(request)
    run = get_visible_or_404(Run, viewer, pk=pk)
    actor = services.Actor.from_request(request)
    try:
        if request.POST.get("action") == "extend":
            hours = _number(request.POST.get("hours"))
            services.soak_extend(actor=actor, viewer=viewer, run=run, hours=hours)
            messages.info(request, f"The soak runs {hours:g} h longer.")
        else:
            reason = request.POST.get("reason", "")
            services.soak_stop(actor=actor, viewer=viewer, run=run, reason=reason)
            messages.info(request, "Stop requested; the agent stops after its current window.")
    except ServiceError as error:
        messages.error(request, error.detail)
    return redirect("gates:run-detail", pk=run.pk)


def _number(text: str | None) -> float | None:
    try:
        return float(text or "")
    except ValueError:
        return None


@login_required
@require_POST
def gate_review(request: HttpRequest, pk: int) -> HttpResponse:
    """Stop-loss review: stop the engagement, or waive the gate, with a justification."""
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    action = (
        services.engagement_stop if request.POST.get("action") == "stop" else services.gate_waive
    )
    try:
        action(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            gate=gate,
            justification=request.POST.get("justification", ""),
        )
        done = "stopped the engagement" if action is services.engagement_stop else "waived"
        messages.success(request, f"{gate.kind} review recorded: {done}, audited and alerted.")
    except ServiceError as error:
        messages.error(request, error.detail)
    return redirect("gates:gate-detail", pk=gate.pk)


@login_required
@require_POST
def spec_sign(request: HttpRequest, pk: int) -> HttpResponse:
    """Sign the version and digest the page showed (a newer version makes this refuse)."""
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate, viewer, pk=pk)
    spec = gate.specs.filter(version=_int(request.POST.get("version"))).first()
    try:
        if spec is None:
            raise ServiceError("that spec version does not exist", field="version")
        services.gate_spec_sign(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            spec=spec,
            digest=request.POST.get("digest") or None,
            ssh_signature=request.POST.get("ssh_signature", ""),
        )
        messages.info(request, f"Signed spec v{spec.version}.")
    except ServiceError as error:
        messages.error(request, error.detail)
    return redirect("gates:gate-detail", pk=gate.pk)


@login_required
@require_POST
def gate_reset(request: HttpRequest, pk: int) -> HttpResponse:
    """Sign a stop-loss reset (opening it with a reason if none is pending)."""
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate, viewer, pk=pk)
    try:
        reset = services.stop_loss_reset_sign(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            gate=gate,
            reason=request.POST.get("reason", ""),
        )
        done = "in effect" if reset.effective_at else "waiting for the other party"
        messages.info(request, f"Stop-loss reset signed: {done}.")
    except ServiceError as error:
        messages.error(request, error.detail)
    return redirect("gates:gate-detail", pk=gate.pk)


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """For load balancers and compose: 503 when a required dependency fails (gates/healthz.py);
    the worker and beat heartbeats, and which are stale, beside the checks."""
    report = service_health()
    if report["checks"]["database"]["ok"]:  # the heartbeats are rows: unreadable without it
        report.update(services.heartbeat_report())
        if report["stale"] and report["status"] == "ok":
            report["status"] = "degraded"
    return JsonResponse(report, status=503 if report["status"] == "unavailable" else 200)
