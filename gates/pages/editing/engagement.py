"""The new engagement page: the fields engagement_create takes, each refusal on its field.
HTTP only: who may create one is tenancy's `engagement.create` (as the API asks), the
customers offered are those the viewer may see, and the service does the writing and audit."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from gates import services
from gates.errors import ServiceError
from gates.models import Organization
from gates.tenancy import Viewer, viewer_for_request, visible


class EngagementForm(forms.Form):
    organization = forms.ModelChoiceField(
        queryset=Organization.objects.none(),
        label="Customer",
        help_text="The customer organization whose hosts and people the engagement is with.",
    )
    title = forms.CharField(max_length=200, help_text="e.g. Qwen3 480B offload trial, Q3.")
    model_name = forms.CharField(
        max_length=200, label="Model under test", help_text="e.g. Qwen/Qwen3-Coder-480B."
    )
    platform = forms.CharField(
        required=False,
        help_text="Optional: GPUs, interconnect, offload tier, e.g. 8x MI300X, TP8, CXL.",
    )
    planned_start = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Optional: the day the ten weeks start.",
    )

    def __init__(self, data=None, *, viewer: Viewer) -> None:
        super().__init__(data)
        self.fields["organization"].queryset = visible(Organization, viewer).filter(
            kind=Organization.Kind.CUSTOMER
        )


def _creator(request: HttpRequest) -> Viewer:
    viewer = viewer_for_request(request)
    if not viewer.can("engagement.create"):
        raise PermissionDenied("only vendor staff may create engagements")
    return viewer


@login_required
@require_http_methods(["GET", "POST"])
def engagement_new(request: HttpRequest) -> HttpResponse:
    """GET: the empty form. POST: create the engagement with its four gates and go to it."""
    viewer = _creator(request)
    form = EngagementForm(request.POST if request.method == "POST" else None, viewer=viewer)
    if form.is_bound and form.is_valid():
        try:
            engagement = services.engagement_create(
                actor=services.Actor.from_request(request), **form.cleaned_data
            )
        except ServiceError as error:
            form.add_error(error.field if error.field in form.fields else None, error.detail)
        else:
            messages.info(request, f"Engagement {engagement.title} created with gates G1-G4.")
            return redirect("gates:engagement-detail", pk=engagement.pk)
    status = 400 if form.errors else 200
    return render(request, "gates/engagement_new.html", {"form": form}, status=status)
