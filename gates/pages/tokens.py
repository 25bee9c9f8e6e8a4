"""The API tokens page: list, create (the secret shown once, in that response only) and revoke,
for vendor staff and customer owners within their own organization. The rules are the tokens
API's: both call services.api_token_create / api_token_revoke over tenancy.manageable_tokens."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from gates import services
from gates.errors import ServiceError
from gates.models import ApiToken, Engagement, Organization
from gates.pages.detail import list_page
from gates.tenancy import Viewer, manageable_tokens, viewer_for_request, visible

SCOPE_HELP = {
    ApiToken.Scope.READ: "read engagements, gates, runs and evidence",
    ApiToken.Scope.RUN: "start and cancel runs, upload results (within your role)",
    ApiToken.Scope.SIGN: "sign spec versions for your party",
    ApiToken.Scope.TOKENS: "create and revoke tokens (never wider than itself)",
}


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What uses it, e.g. 'nightly CI'.")
    scopes = forms.MultipleChoiceField(
        choices=[(scope, f"{scope}: {SCOPE_HELP[scope]}") for scope in ApiToken.Scope.values],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "choose at least one scope"},
    )
    organization = forms.ModelChoiceField(queryset=Organization.objects.none())
    engagement = forms.ModelChoiceField(
        queryset=Engagement.objects.none(),
        required=False,
        empty_label="every engagement of the organization",
        help_text="Bind the token to one engagement to keep a leak small.",
    )
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires (UTC)",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Leave empty for a token that lasts until revoked.",
    )

    def __init__(self, data, *, viewer: Viewer) -> None:
        super().__init__(data)
        organizations = Organization.objects.filter(id__in=viewer.organization_ids)
        self.fields["organization"].queryset = organizations
        self.fields["organization"].empty_label = None  # most people have exactly one
        self.fields["engagement"].queryset = visible(Engagement, viewer).order_by("title")


def _viewer_who_manages_tokens(request: HttpRequest) -> Viewer:
    viewer = viewer_for_request(request)
    if not viewer.can("token.manage"):
        raise PermissionDenied("API tokens are managed by vendor staff and customer owners")
    return viewer


@never_cache  # the response that shows a new secret must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    viewer = _viewer_who_manages_tokens(request)
    form = TokenForm(request.POST if request.method == "POST" else None, viewer=viewer)
    created, secret = None, None
    if form.is_bound and form.is_valid():
        try:
            created, secret = services.api_token_create(
                actor=services.Actor.from_request(request),
                viewer=viewer,
                **form.cleaned_data,
            )
            form = TokenForm(None, viewer=viewer)
        except ServiceError as error:
            form.add_error(error.field if error.field in form.fields else None, error.detail)
    tokens = manageable_tokens(viewer).select_related("organization", "engagement", "created_by")
    page = list_page(request, tokens.order_by("-created_at", "-id"))
    context = {"form": form, "tokens": page, "page": page, "created": created}
    # The secret goes into this one response only: never a message cookie, never the session.
    context["secret"] = secret
    return render(request, "tokens/list.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation; POST revokes (at once: CI using it gets 401 from then on)."""
    viewer = _viewer_who_manages_tokens(request)
    token = manageable_tokens(viewer).select_related("organization").filter(pk=pk).first()
    if token is None:
        raise Http404("not found")  # another organization's token, or none: the same answer
    if request.method == "GET":
        return render(request, "tokens/revoke.html", {"token": token})
    services.api_token_revoke(actor=services.Actor.from_request(request), token=token)
    messages.info(request, f"Token {token.name} ({token.prefix}…) revoked.")
    return redirect("gates:token-list")
