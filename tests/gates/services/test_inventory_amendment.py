"""An amended inventory signed by both parties: G1 runs for real on simhost, the host's driver
is updated, the G3 re-probe says `invalid`; the vendor proposes what it saw, and only once the
customer has signed too does a later G3 run accept the changed host."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from gates import services, sshsig
from gates.errors import NotAllowedError, ServiceError
from gates.models import Alert, AuditEvent, InventoryAmendment, InventorySignature
from gates.models.appendonly import AppendOnlyError
from gates.services.contract.specs import SupersededSpecError
from gates.tenancy import viewer_for_user
from tests.gates.test_sshsig import keygen, needs_ssh_keygen, ssh_sign
from tests.runners.program.test_gate_programs import drive, start, tasks_run_here  # noqa: F401
from tests.runners.test_contract_check import change_host, g3_after_g1, servers_started
from tests.simhosts import local_simhost

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
REASON = "the customer updated the NVIDIA driver on this host, as agreed in the kickoff call"


def as_user(user) -> dict:
    return {"actor": services.Actor(user=user), "viewer": viewer_for_user(user)}


def propose(user, run, reason: str = REASON):
    return services.inventory_amendment_propose(run=run, reason=reason, **as_user(user))


def sign(user, amendment, **options):
    return services.inventory_amendment_sign(amendment=amendment, **options, **as_user(user))


@pytest.fixture
def updated_driver(actor, vendor_viewer, engagement, customer_org, tmp_path):
    """(the invalid G3 run, a callable that runs G3 again) after the driver changed."""
    host = local_simhost(customer_org, tmp_path / "host")
    run_g3 = g3_after_g1(actor, vendor_viewer, engagement, host)
    change_host(host, driver_version="550.90.07")
    run = run_g3()
    assert [c["check"] for c in run.decisions.get().clauses] == ["inventory.driver_version"]
    return run, run_g3


def test_the_changed_host_is_accepted_only_once_both_parties_signed(
    vendor_admin, vendor_engineer, customer_owner, updated_driver, engagement
):
    invalid_run, run_g3 = updated_driver
    amendment, created = propose(vendor_engineer, invalid_run)
    assert created and amendment.inventory["driver_version"] == "550.90.07"
    alert = Alert.objects.get(event="inventory_proposed")
    assert "driver_version: '550.54.15' accepted at G1, '550.90.07' now" in alert.body
    assert alert.recipients == [customer_owner.email]  # the other party, not the proposer
    assert AuditEvent.objects.filter(action="inventory.propose").count() == 1

    sign(vendor_admin, amendment, digest=amendment.digest)
    still = run_g3()
    assert still.decisions.get().verdict == "invalid"  # one signature is not the contract
    assert servers_started(still) == 0

    signed = sign(customer_owner, amendment, digest=amendment.digest)
    assert signed.in_force
    assert services.accepted_inventory(engagement)["driver_version"] == "550.90.07"
    accepted = run_g3()
    assert servers_started(accepted) > 0, accepted.log
    assert accepted.decisions.get().verdict != "invalid"
    assert AuditEvent.objects.filter(action="inventory.sign").count() == 2


def test_who_may_propose_and_sign(
    vendor_admin, vendor_engineer, customer_owner, customer_viewer, updated_driver
):
    invalid_run, _ = updated_driver
    with pytest.raises(NotAllowedError):
        propose(customer_owner, invalid_run)
    with pytest.raises(ServiceError, match="at least 20 characters"):
        propose(vendor_engineer, invalid_run, reason="swapped")
    amendment, _ = propose(vendor_engineer, invalid_run)
    for user in (vendor_engineer, customer_viewer):
        with pytest.raises(NotAllowedError):
            sign(user, amendment)
    assert not InventorySignature.objects.exists()


def test_proposing_twice_makes_one_amendment_and_a_superseded_one_cannot_be_signed(
    vendor_engineer, customer_owner, updated_driver
):
    invalid_run, _ = updated_driver
    first, _ = propose(vendor_engineer, invalid_run)
    again, created = propose(vendor_engineer, invalid_run)
    assert (again.pk, created) == (first.pk, False)
    with pytest.raises(SupersededSpecError, match="digest"):
        sign(customer_owner, first, digest="0" * 64)
    newer = InventoryAmendment.objects.create(
        engagement=first.engagement, inventory={}, digest="f" * 64, reason=REASON
    )
    with pytest.raises(SupersededSpecError, match="newer inventory amendment"):
        sign(customer_owner, first)
    assert sign(customer_owner, newer).signed_parties == {"customer"}
    with pytest.raises(AppendOnlyError):
        newer.delete()


@needs_ssh_keygen
def test_the_api_shows_the_proposal_and_takes_the_signatures(
    vendor_admin, customer_owner, updated_driver, engagement, tmp_path
):
    invalid_run, _ = updated_driver
    vendor, customer = APIClient(), APIClient()
    vendor.force_login(vendor_admin)
    customer.force_login(customer_owner)
    amend = reverse("api:engagement-inventory-amend", args=[engagement.pk])
    answer = vendor.post(amend, {"run": invalid_run.pk, "reason": REASON}, format="json")
    assert answer.status_code == 201, answer.content
    proposed = answer.json()["proposed"]
    assert [c["field"] for c in proposed["changes"]] == ["driver_version"]
    assert proposed["awaiting"] == ["vendor", "customer"]
    assert vendor.post(amend, {"run": invalid_run.pk, "reason": REASON}).status_code == 200
    refused = customer.post(amend, {"run": invalid_run.pk, "reason": REASON}, format="json")
    assert refused.status_code == 403
    sign_url = reverse("api:engagement-inventory-sign", args=[engagement.pk])
    body = {"amendment": proposed["id"], "digest": proposed["digest"]}
    assert vendor.post(sign_url, body, format="json").status_code == 200
    # The customer signs with their own registered Ed25519 key (ssh-keygen -Y sign).
    key = keygen(tmp_path)
    public_key = Path(f"{key}.pub").read_text()
    registered = customer.post(reverse("api:party-keys"), {"public_key": public_key}, format="json")
    wrong = {**body, "ssh_signature": ssh_sign(key, "0" * 64, tmp_path)}
    refused = customer.post(sign_url, wrong, format="json")
    assert (refused.status_code, refused.json()["field"]) == (400, "ssh_signature")
    good = {**body, "ssh_signature": ssh_sign(key, proposed["digest"], tmp_path)}
    assert customer.post(sign_url, good, format="json").status_code == 200
    view = customer.get(reverse("api:engagement-inventory", args=[engagement.pk])).json()
    assert view["source"] == "amendment" and view["proposed"] is None
    assert view["accepted"]["driver_version"] == "550.90.07"
    signatures = {s["party"]: s for s in view["in_force"]["signatures"]}
    assert set(signatures) == {"vendor", "customer"}
    assert signatures["customer"]["key_fingerprint"] == registered.json()["fingerprint"]
    assert sshsig.verify(signatures["customer"]["ssh_signature"], proposed["digest"].encode())


def test_the_pages_offer_the_proposal_and_the_signature(
    vendor_admin, customer_owner, updated_driver, engagement
):
    invalid_run, _ = updated_driver
    vendor, customer = Client(), Client()
    vendor.force_login(vendor_admin)
    customer.force_login(customer_owner)
    run_page = vendor.get(reverse("gates:run-detail", args=[invalid_run.pk])).content.decode()
    assert "Propose the amended inventory" in run_page
    assert (
        "Propose the amended inventory"
        not in customer.get(reverse("gates:run-detail", args=[invalid_run.pk])).content.decode()
    )
    vendor.post(reverse("gates:inventory-amend", args=[invalid_run.pk]), {"reason": REASON})
    amendment = InventoryAmendment.objects.get()
    page = customer.get(reverse("gates:engagement-detail", args=[engagement.pk])).content.decode()
    assert "Sign the amended inventory as customer" in page and "550.90.07" in page
    customer.post(
        reverse("gates:inventory-sign", args=[engagement.pk]),
        {"amendment": amendment.pk, "digest": amendment.digest},
    )
    assert amendment.signed_parties == {"customer"}
