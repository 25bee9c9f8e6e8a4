"""Vendor claims in the evidence library: a sentence with numbers citing published reports.
Its status is never stored: it is computed from the reports whenever it is read."""

from __future__ import annotations

from django.db import transaction

from gates.errors import NotAllowedError, ServiceError
from gates.models import Claim, Membership, Publication
from gates.services.audit import Actor, audit_record
from gates.tenancy import Viewer


def claim_create(
    *, actor: Actor, viewer: Viewer, text: str, publications: list[Publication]
) -> Claim:
    """A vendor admin's claim, citing one or more published reports."""
    membership = next(
        (m for m in viewer.memberships if m.role == Membership.Role.VENDOR_ADMIN), None
    )
    if membership is None:
        raise NotAllowedError("only a vendor admin writes claims for the library")
    text = " ".join(text.split())
    if not text or len(text) > 1000:
        raise ServiceError("a claim is one sentence of at most 1000 characters", field="text")
    if not publications or any(p.state != Publication.State.PUBLISHED for p in publications):
        raise ServiceError("a claim cites one or more published reports", field="publications")
    with transaction.atomic():
        claim = Claim.objects.create(
            organization=membership.organization, text=text, created_by=viewer.user
        )
        claim.publications.set(publications)
        audit_record(
            actor=actor,
            action="library.claim",
            target=claim,
            organization_id=membership.organization_id,
            detail={"claim": claim.slug, "publications": [p.slug for p in publications]},
        )
    return claim
