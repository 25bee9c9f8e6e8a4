"""Power before signing (issue 26): a G3 spec that requires power and cannot reach it at the
known noise is signed only with an acknowledgement both parties give, which is kept with the
signatures, shown on the gate page and lets the run start; the contract says what a stop-loss
reset adds to the engagement's error before both sign it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates import services
from gates.models import Alert, AlertPreference, Gate, Run, SpecSignature
from gates.services.contract.power import UnderpoweredSpecError, spec_power
from tests.contract import sign_as_both
from tests.gates.services.test_attempts import decided_attempt

pytestmark = pytest.mark.django_db


def g3_at_stated_cv(actor, engagement, cv_pct: float) -> Gate:
    """The shipped template (it requires power) with its stated noise set to `cv_pct`."""
    gate = engagement.gates.get(kind="G3")
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    document = gate.current_spec.document
    assert document["statistics"]["require_power"] is True
    document["statistics"]["noise_cv_pct"] = cv_pct
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    gate.refresh_from_db()
    return gate


def test_the_shipped_template_is_signable_at_its_own_stated_noise(actor, engagement):
    gate = engagement.gates.get(kind="G3")
    power = spec_power(gate.current_spec)
    assert power is not None and power["available"] and not power["underpowered"]
    assert power["power"] >= 0.8 and "stated CV 4 %" in power["noise"]
    sign_as_both(gate)
    assert gate.current_spec.in_force
    assert not SpecSignature.objects.filter(acknowledged_power__isnull=False).exists()


def test_an_underpowered_spec_is_refused_at_signing_with_its_power_and_a_remedy(
    actor, vendor_viewer, engagement
):
    gate = g3_at_stated_cv(actor, engagement, 10)
    with pytest.raises(UnderpoweredSpecError) as refused:
        sign_as_both(gate)
    assert refused.value.field == "acknowledge_underpowered"
    text = str(refused.value)
    assert "the spec's stated CV 10 %" in text and "under the 80%" in text
    assert "workload.num_prompts" in text or "repetitions.max" in text  # what would fix it
    assert "bars the data can show at this cost" in text and "; or drop " in text
    assert not SpecSignature.objects.exists()
    with pytest.raises(UnderpoweredSpecError) as not_run:  # unsigned: not even a rehearsal
        services.run_create(
            actor=actor,
            viewer=vendor_viewer,
            gate=gate,
            host=None,
            source=Run.Source.UPLOAD,
        )
    assert not_run.value.field == "statistics.require_power"


def test_both_acknowledging_puts_it_in_force_lets_it_run_and_the_page_says_so(
    actor, vendor_viewer, engagement, client, customer_owner
):
    gate = g3_at_stated_cv(actor, engagement, 10)
    spec = sign_as_both(gate, acknowledge_underpowered=True)
    assert spec.in_force
    rows = list(spec.signatures.all())
    assert len(rows) == 2
    for row in rows:
        assert row.acknowledged_power["power"] < 0.8 <= row.acknowledged_power["min_power"]
        assert row.acknowledged_power["proposals"]
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=gate, host=None, source=Run.Source.UPLOAD
    )
    assert not run.rehearsal
    client.force_login(customer_owner)
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert page.count("acknowledged underpowered") == 2


def test_the_contract_shows_what_a_reset_adds_before_both_sign_it(
    actor, vendor_viewer, engagement, client, customer_owner
):
    gate = engagement.gates.get(kind="G3")
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    sign_as_both(gate)
    decided_attempt(actor, vendor_viewer, gate, "fail")
    client.force_login(customer_owner)
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    per_side = (1 - gate.current_spec.document["confidence"]) / 2 * 100  # the template: 5 %
    assert f"from at most {per_side:.1f} % to at most {2 * per_side:.1f} %" in page
    assert 'data-field="reset-cost"' in page


ACKNOWLEDGED = "Both parties signed this spec acknowledging it was underpowered: it passes "


def review_page_and_alert(actor, vendor_viewer, gate: Gate, client, vendor_admin) -> tuple:
    """Spend the template's two attempts on fails: the review opens, on the page and alerted."""
    for _ in range(2):
        decided_attempt(actor, vendor_viewer, gate, "fail")
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    assert "Stop-loss review" in page
    return page, Alert.objects.get(event="stop_loss_review").body


def test_the_stop_loss_review_says_both_signed_it_acknowledging_it_was_underpowered(
    actor, vendor_viewer, engagement, client, vendor_admin
):
    gate = g3_at_stated_cv(actor, engagement, 10)
    spec = sign_as_both(gate, acknowledge_underpowered=True)
    power = spec.signatures.first().acknowledged_power["power"]
    page, body = review_page_and_alert(actor, vendor_viewer, gate, client, vendor_admin)
    source = spec.document["statistics"]["noise_source"]
    line = f"{ACKNOWLEDGED}{100 * power:.3g} % at its claims at noise CV 10 % ({source})"
    assert line in body
    assert 'data-field="acknowledged-underpowered">' + ACKNOWLEDGED in page
    assert f"{100 * power:.3g} % at its claims at noise CV 10 %" in page


def test_the_stop_loss_review_of_a_spec_signed_at_its_power_says_nothing_of_it(
    actor, vendor_viewer, engagement, client, vendor_admin
):
    gate = engagement.gates.get(kind="G3")
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    sign_as_both(gate)
    page, body = review_page_and_alert(actor, vendor_viewer, gate, client, vendor_admin)
    assert ACKNOWLEDGED not in page and ACKNOWLEDGED not in body
    assert "Attempts are spent" in body


def test_inconclusive_attempts_that_spend_the_budget_raise_the_review_not_a_muted_verdict(
    actor, vendor_viewer, engagement, customer_viewer
):
    """What the template's underpowered claims mostly end in (issue 26): two inconclusive
    attempts. The second opens the review; its alert is the critical review (with the line
    saying both signed it underpowered), not the switchable 'inconclusive' that says it does not
    count, which a person may have muted."""
    AlertPreference.objects.create(user=customer_viewer, muted_events=["gate_inconclusive"])
    gate = g3_at_stated_cv(actor, engagement, 10)
    sign_as_both(gate, acknowledge_underpowered=True)
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    first = Alert.objects.get(event="gate_inconclusive")
    assert "does not count toward stop-loss" in first.body and ACKNOWLEDGED not in first.body
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    gate.refresh_from_db()
    assert gate.stop_loss_review
    review = Alert.objects.get(event="stop_loss_review")
    assert review.critical and review.subject.endswith("G3 was inconclusive - stop-loss review")
    assert "was inconclusive on spec" in review.body and "Attempts are spent" in review.body
    assert ACKNOWLEDGED in review.body
    assert Alert.objects.filter(event="gate_inconclusive").count() == 1  # the first one only
    assert customer_viewer.email in review.recipients and customer_viewer.email not in (
        first.recipients
    )
