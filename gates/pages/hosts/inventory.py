"""The accepted host inventory on the pages: what runs are held to, the amendment awaiting
signatures (engagement page), proposing one from an invalid run (run page), and signing it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from gates import services
from gates.api.inventory import inventory_view
from gates.errors import ServiceError
from gates.inputs import PageInputError, id_input
from gates.models import Decision, Engagement, Run, Verdict
from gates.tenancy import Viewer, get_visible_or_404, viewer_for_request


def engagement_inventory(engagement: Engagement, viewer: Viewer) -> dict:
    """inventory_view plus the party this viewer may still sign the proposal for."""
    view = inventory_view(engagement)
    proposed = view["proposed"]
    party = viewer.signing_party
    view["can_sign_as"] = party if proposed and party in proposed["awaiting"] else None
    return view


def run_can_amend_inventory(run: Run, viewer: Viewer) -> bool:
    """A vendor may propose the host a run saw when its contract check ended it invalid."""
    if not (viewer.is_vendor and viewer.can("spec.edit")):
        return False
    decision = run.decisions.filter(kind=Decision.Kind.ENGINE, verdict=Verdict.INVALID).first()
    return decision is not None and any(
        str(clause.get("check", "")).startswith("inventory.") for clause in decision.clauses
    )


@login_required
@require_POST
def inventory_amend(request: HttpRequest, pk: int) -> HttpResponse:
    """Propose the inventory this run's re-probe saw as the engagement's accepted one."""
    viewer = viewer_for_request(request)
    run = get_visible_or_404(Run.objects.select_related("gate__engagement"), viewer, pk=pk)
    try:
        services.inventory_amendment_propose(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            run=run,
            reason=request.POST.get("reason", ""),
        )
        messages.info(request, "Amended inventory proposed: the customer is asked to sign it.")
    except ServiceError as error:
        messages.error(request, error.detail)
        return redirect("gates:run-detail", pk=run.pk)
    return redirect("gates:engagement-detail", pk=run.gate.engagement_id)


@login_required
@require_POST
def inventory_sign(request: HttpRequest, pk: int) -> HttpResponse:
    """Sign the amendment and digest the engagement page showed."""
    viewer = viewer_for_request(request)
    engagement = get_visible_or_404(Engagement, viewer, pk=pk)
    try:
        amendment_id = id_input(request.POST, "amendment")
        amendment = engagement.inventory_amendments.filter(pk=amendment_id).first()
        if amendment is None:
            raise ServiceError("no such inventory amendment", field="amendment")
        signed = services.inventory_amendment_sign(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            amendment=amendment,
            digest=request.POST.get("digest") or None,
            ssh_signature=request.POST.get("ssh_signature", ""),
        )
        done = "in force" if signed.in_force else "waiting for the other party"
        messages.info(request, f"Inventory amendment signed: {done}.")
    except (ServiceError, PageInputError) as error:
        messages.error(request, error.detail)
    return redirect("gates:engagement-detail", pk=engagement.pk)
