"""Publishing a gate's report in the library, for the engagement's parties: the vendor admin
proposes, the customer owner approves (naming and host details) or declines, either withdraws;
and a vendor admin's claims. HTTP only: the rules are gates/evidence/publication.py's."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from gates import services
from gates.errors import ServiceError
from gates.evidence import publication as publishing
from gates.evidence.redaction import HOST_DETAILS
from gates.models import Gate, Publication
from gates.pages.library.public import claim_status
from gates.services.claims import claim_create
from gates.tenancy import get_visible_or_404, viewer_for_request


@login_required
@require_http_methods(["GET", "POST"])
def gate_publication(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    decision = gate.decisions.first()
    current = decision.publications.order_by("-id").first() if decision else None
    if request.method == "POST" and decision is not None:
        try:
            _act(request, viewer, decision, current)
        except ServiceError as error:
            messages.error(request, error.detail)
        return redirect("gates:gate-publication", pk=gate.pk)
    context = {
        "gate": gate,
        "decision": decision,
        "publication": current,
        "party": viewer.party,
        "naming_choices": Publication.Naming.choices,
        "host_details": HOST_DETAILS,
    }
    return render(request, "library/publish.html", context)


def _act(request: HttpRequest, viewer, decision, current: Publication | None) -> None:
    actor = services.Actor.from_request(request)
    action = request.POST.get("action")
    if action == "propose":
        publishing.publication_propose(actor=actor, viewer=viewer, decision=decision)
        messages.success(request, "Proposed: the customer's owner is asked to approve.")
    elif action == "approve" and current is not None:
        publishing.publication_approve(
            actor=actor,
            viewer=viewer,
            publication=current,
            naming=request.POST.get("naming", ""),
            industry_label=request.POST.get("industry_label", ""),
            host_details=request.POST.getlist("host_details"),
        )
        messages.success(request, "Published in the evidence library.")
    elif action == "withdraw" and current is not None:
        publishing.publication_withdraw(
            actor=actor, viewer=viewer, publication=current, reason=request.POST.get("reason", "")
        )
        messages.success(request, "Withdrawn: the library's page now says so.")
    else:
        raise ServiceError("nothing to do")


@login_required
@require_http_methods(["GET", "POST"])
def claim_new(request: HttpRequest) -> HttpResponse:
    viewer = viewer_for_request(request)
    published = Publication.objects.filter(state=Publication.State.PUBLISHED)
    if request.method == "POST":
        chosen = list(published.filter(slug__in=request.POST.getlist("publications")))
        try:
            claim = claim_create(
                actor=services.Actor.from_request(request),
                viewer=viewer,
                text=request.POST.get("text", ""),
                publications=chosen,
            )
        except ServiceError as error:
            messages.error(request, error.detail)
        else:
            check = claim_status(claim)
            messages.success(request, f"Claim saved: {check.status} ({check.reason}).")
            return redirect("gates:library-claim", slug=claim.slug)
    return render(request, "library/claim_new.html", {"published": published})
