"""Alert pages: the signed acknowledge link (no sign-in: the email is the key), acknowledging
from the engagement page, each person's muted events, an engagement's alert settings and
webhooks. HTTP only: forms in, services called."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from gates import services
from gates.alerts.events import EVENTS, SWITCHABLE
from gates.alerts.links import AckLinkError, ack_key
from gates.errors import ServiceError
from gates.models import Alert, AlertPreference, AlertSettings, Engagement, WebhookEndpoint
from gates.tenancy import get_visible_or_404, viewer_for_request

SWITCHABLE_CHOICES = [(name, EVENTS[name].title) for name in SWITCHABLE]


class MutedEventsForm(forms.Form):
    muted_events = forms.MultipleChoiceField(
        choices=SWITCHABLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )


class EngagementAlertsForm(forms.Form):
    disabled_events = forms.MultipleChoiceField(
        choices=SWITCHABLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )
    extra_emails = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    escalation_emails = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))


class WebhookForm(forms.Form):
    url = forms.CharField(max_length=500)
    format = forms.ChoiceField(choices=WebhookEndpoint.Format.choices)
    secret = forms.CharField(required=False, help_text="PagerDuty: the routing key")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]


@require_http_methods(["GET", "POST"])
def alert_ack(request: HttpRequest, token: str) -> HttpResponse:
    """GET only shows the button: mail scanners fetch links, and must not acknowledge."""
    try:
        alert = Alert.objects.filter(idempotency_key=ack_key(token), parent__isnull=True).first()
        if request.method == "POST":
            actor = services.Actor(
                user=request.user if request.user.is_authenticated else None,
                label="ack-link",
                ip=request.META.get("REMOTE_ADDR"),
            )
            alert = services.alert_acknowledge_link(actor=actor, token=token)
            return render(request, "alerts/ack.html", {"alert": alert, "done": True})
        if alert is None:
            raise AckLinkError("this acknowledge link is not valid")
        if alert.acked_at is not None:
            raise AckLinkError("this alert was already acknowledged; the link works once")
    except AckLinkError as error:
        return render(request, "alerts/ack.html", {"error": error.reason}, status=400)
    return render(request, "alerts/ack.html", {"alert": alert, "token": token})


@login_required
@require_POST
def alert_ack_here(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    alert = get_visible_or_404(Alert, viewer, pk=pk, parent__isnull=True)
    if not viewer.can("alert.ack"):
        messages.error(request, "You may not acknowledge alerts.")
    elif services.alert_acknowledge(actor=services.Actor.from_request(request), alert=alert):
        messages.info(request, "Alert acknowledged; its escalation stops.")
    return redirect("gates:engagement-detail", pk=alert.engagement_id)


@login_required
@require_http_methods(["GET", "POST"])
def alert_preferences(request: HttpRequest) -> HttpResponse:
    found = AlertPreference.objects.filter(user=request.user).first()
    form = MutedEventsForm(
        request.POST or None, initial={"muted_events": found.muted_events if found else []}
    )
    if request.method == "POST" and form.is_valid():
        services.alert_preference_save(
            user=request.user, muted_events=form.cleaned_data["muted_events"]
        )
        messages.info(request, "Alert preferences saved.")
        return redirect("gates:alert-preferences")
    return render(request, "alerts/preferences.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
def engagement_alerts(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = viewer_for_request(request)
    engagement = get_visible_or_404(Engagement, viewer, pk=pk)
    current = AlertSettings.objects.filter(engagement=engagement).first() or AlertSettings()
    form = EngagementAlertsForm(
        request.POST if request.POST.get("form") == "settings" else None,
        initial={
            "disabled_events": current.disabled_events,
            "extra_emails": "\n".join(current.extra_emails),
            "escalation_emails": "\n".join(current.escalation_emails),
        },
    )
    webhook_form = WebhookForm(request.POST if request.POST.get("form") == "webhook" else None)
    new_secret = None
    if request.method == "POST":
        saved, new_secret = _save_settings(request, viewer, engagement, form, webhook_form)
        if saved and new_secret is None:
            return redirect("gates:engagement-alerts", pk=engagement.pk)
    return render(
        request,
        "alerts/engagement_settings.html",
        {
            "engagement": engagement,
            "form": form,
            "webhook_form": webhook_form,
            "webhooks": engagement.webhooks.filter(active=True),
            "can_configure": viewer.can("alert.configure"),
            # Rendered once in this response, never put in a message cookie or the session.
            "new_secret": new_secret,
        },
    )


def _save_settings(request, viewer, engagement, form, webhook_form) -> tuple[bool, str | None]:
    actor = services.Actor.from_request(request)
    try:
        if form.is_bound and form.is_valid():
            services.engagement_alert_settings_save(
                actor=actor,
                viewer=viewer,
                engagement=engagement,
                disabled_events=form.cleaned_data["disabled_events"],
                extra_emails=_lines(form.cleaned_data["extra_emails"]),
                escalation_emails=_lines(form.cleaned_data["escalation_emails"]),
            )
            messages.info(request, "Alert settings saved.")
            return True, None
        if webhook_form.is_bound and webhook_form.is_valid():
            _, secret = services.webhook_create(
                actor=actor,
                viewer=viewer,
                engagement=engagement,
                url=webhook_form.cleaned_data["url"],
                fmt=webhook_form.cleaned_data["format"],
                secret=webhook_form.cleaned_data["secret"],
            )
            return True, secret
    except ServiceError as error:
        target = webhook_form if webhook_form.is_bound else form
        field = error.field if error.field in target.fields else None
        target.add_error(field, error.detail)
    return False, None
