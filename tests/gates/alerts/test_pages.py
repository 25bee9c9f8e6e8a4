"""The alert pages: a person's muted events, an engagement's switches, addresses and webhooks;
bad input is named on the form and nothing is saved; another customer sees a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.models import AlertPreference, AlertSettings, AuditEvent

pytestmark = pytest.mark.django_db


def test_a_person_mutes_a_switchable_event(client, customer_viewer):
    client.force_login(customer_viewer)
    url = reverse("gates:alert-preferences")
    assert b"gate_inconclusive" in client.get(url).content
    client.post(url, {"muted_events": ["gate_inconclusive"]})
    assert AlertPreference.objects.get(user=customer_viewer).muted_events == ["gate_inconclusive"]
    refused = client.post(url, {"muted_events": ["gate_failed"]})  # not switchable
    assert refused.status_code == 200 and b"not one of the available choices" in refused.content
    assert AlertPreference.objects.get(user=customer_viewer).muted_events == ["gate_inconclusive"]


def test_the_customer_owner_sets_the_engagements_alerts(client, customer_owner, engagement):
    client.force_login(customer_owner)
    url = reverse("gates:engagement-alerts", args=[engagement.pk])
    client.post(
        url,
        {
            "form": "settings",
            "disabled_events": ["gate_invalid"],
            "extra_emails": "ops@northwind.example\n",
            "escalation_emails": "cto@northwind.example",
        },
    )
    saved = AlertSettings.objects.get(engagement=engagement)
    assert saved.disabled_events == ["gate_invalid"]
    assert saved.extra_emails == ["ops@northwind.example"]
    assert AuditEvent.objects.filter(action="alerts.configure").count() == 1


def test_a_bad_address_is_named_and_nothing_is_saved(client, customer_owner, engagement):
    client.force_login(customer_owner)
    response = client.post(
        reverse("gates:engagement-alerts", args=[engagement.pk]),
        {"form": "settings", "extra_emails": "not an address", "escalation_emails": ""},
    )
    assert response.status_code == 200 and b"is not an email address" in response.content
    assert not AlertSettings.objects.exists()


def test_an_ssrf_webhook_url_is_refused_on_the_page(client, vendor_admin, engagement):
    client.force_login(vendor_admin)
    response = client.post(
        reverse("gates:engagement-alerts", args=[engagement.pk]),
        {"form": "webhook", "url": "https://169.254.169.254/hook", "format": "tollgate"},
    )
    assert b"link-local" in response.content and not engagement.webhooks.exists()


def test_a_viewer_cannot_change_settings(client, customer_viewer, engagement):
    client.force_login(customer_viewer)
    url = reverse("gates:engagement-alerts", args=[engagement.pk])
    assert b"Only vendor staff" in client.get(url).content
    client.post(url, {"form": "settings", "extra_emails": "x@northwind.example"})
    assert not AlertSettings.objects.exists()


def test_another_customers_engagement_is_a_404(client, other_owner, engagement):
    client.force_login(other_owner)
    assert client.get(reverse("gates:engagement-alerts", args=[engagement.pk])).status_code == 404
