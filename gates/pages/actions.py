"""The page actions (POST forms): start and cancel a run, stop or extend a soak, review a gate in
stop-loss, sign a spec, sign a stop-loss reset. HTTP only: look up through tenancy, call a
service, redirect with a message."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from gates import services
from gates.errors import ServiceError
from gates.inputs import PageInputError, id_input
from gates.models import Gate, Host, Run
from gates.tenancy import get_visible_or_404, viewer_for_request, visible


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
        services.run_cancel(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            reason=request.POST.get("reason", ""),
        )
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
    try:
        spec = gate.specs.filter(version=id_input(request.POST, "version")).first()
        if spec is None:
            raise ServiceError("that spec version does not exist", field="version")
        services.gate_spec_sign(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            spec=spec,
            digest=request.POST.get("digest") or None,
            ssh_signature=request.POST.get("ssh_signature", ""),
            acknowledge_underpowered=request.POST.get("acknowledge_underpowered") == "on",
        )
        messages.info(request, f"Signed spec v{spec.version}.")
    except (ServiceError, PageInputError) as error:
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
