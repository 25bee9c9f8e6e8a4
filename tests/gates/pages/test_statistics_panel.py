"""The G3 statistics panel and API: the operating characteristic at the G2 noise before
signing, and the latest decision cell by cell (look, ratio interval, each repetition)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.selectors import engagement_noise_floor, gate_operating_characteristic
from tests.gates.pages.test_dashboards import open_g3, record_g3_decision
from tests.gates.test_tenancy import token_client


@pytest.mark.django_db
def test_the_g3_page_shows_what_the_spec_can_decide_at_the_g2_noise_and_each_repetition(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    noise = engagement_noise_floor(engagement)
    assert noise["metric"] == "ttft_p50" and noise["sd_log_ratio"] > 0
    client.force_login(customer_viewer)
    html = client.get(reverse("gates:gate-detail", args=[decision.gate_id])).content.decode()
    assert "What this spec can decide" in html
    assert f"{noise['sd_log_ratio']:.3f} (the G2 A/A noise of ttft_p50)" in html
    # The gate's chances with every clause at its claimed effect, before anyone signs.
    assert "every clause at its claimed effect" in html
    # The OC's own sampling error and the whole engagement (cancels, resets), 20,000 gates a row.
    assert "20000 simulated gates per row" in html and " ± " in html
    assert (
        'id="lifetime"' in html and "cancel every attempt still open after its first look" in html
    )
    first = decision.result["clauses"][0]
    assert first["shown"]["look"] in html and first["shown"]["interval"] in html
    assert f"r1 {first['pairs'][0]['ratio']:.3g}x" in html


@pytest.mark.django_db
def test_the_statistics_api_gives_the_operating_characteristic_and_the_cells(
    actor, vendor_viewer, engagement, customer_owner, customer_org, other_owner
):
    decision = record_g3_decision(actor, vendor_viewer, engagement, repetitions=4)
    url = reverse("api:gate-statistics", args=[decision.gate_id])
    body = token_client(customer_owner, customer_org).get(url).json()
    oc = body["operating_characteristic"]
    assert oc["available"] and oc["plan"]["looks"] == [8, 18, 28]
    assert {"pass", "fail", "inconclusive", "repetitions"} <= set(oc["gate"]["at_claims"])
    assert len(body["cells"]) == len(decision.result["clauses"])
    assert [rep["repetition"] for rep in body["cells"][0]["repetitions"]] == [1, 2, 3, 4]
    other = token_client(other_owner, other_owner.memberships.first().organization)
    assert other.get(url).status_code == 404
    g1 = engagement.gates.get(kind="G1")
    response = token_client(customer_owner, customer_org).get(
        reverse("api:gate-statistics", args=[g1.pk])
    )
    # A gate without an operating characteristic answers with none rather than a 404.
    assert response.status_code == 200
    assert response.json() == {"operating_characteristic": None, "cells": []}


@pytest.mark.django_db
def test_without_g2_noise_the_spec_s_stated_cv_is_used(actor, vendor_viewer, engagement):
    gate = engagement.gates.get(kind="G3")
    oc = gate_operating_characteristic(gate)
    assert oc["available"] and oc["noise"]["source"].startswith("the spec's stated CV 4 % (")
    open_g3(actor, vendor_viewer, engagement)
    assert gate_operating_characteristic(gate)["noise"]["source"].startswith("the G2 A/A noise")
