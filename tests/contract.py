"""Test helper: both parties sign a gate's latest spec through the services, so the test's
verdicts count (a run on an unsigned version is a rehearsal)."""

from __future__ import annotations

from gates import services
from gates.models import Gate, GateSpec, Membership, Organization
from gates.tenancy import viewer_for_user
from tests.conftest import make_user


def sign_as_both(gate: Gate, *, acknowledge_underpowered: bool = False) -> GateSpec:
    """A vendor admin and the customer's owner sign the gate's latest version."""
    spec = gate.current_spec
    for user in _signers(gate.engagement.organization):
        services.gate_spec_sign(
            actor=services.Actor(user=user, label="test"),
            viewer=viewer_for_user(user),
            spec=spec,
            acknowledge_underpowered=acknowledge_underpowered,
        )
    return spec


def _signers(customer: Organization) -> list:
    admin = Membership.objects.filter(role=Membership.Role.VENDOR_ADMIN).first()
    if admin is None:
        vendor, _ = Organization.objects.get_or_create(
            slug="signing-vendor", defaults={"name": "Signing vendor", "kind": "vendor"}
        )
        admin_user = make_user("signing-vadmin", vendor, Membership.Role.VENDOR_ADMIN)
    else:
        admin_user = admin.user
    owner = Membership.objects.filter(
        role=Membership.Role.CUSTOMER_OWNER, organization=customer
    ).first()
    owner_user = (
        owner.user
        if owner
        else make_user(f"signing-owner-{customer.pk}", customer, Membership.Role.CUSTOMER_OWNER)
    )
    return [admin_user, owner_user]
