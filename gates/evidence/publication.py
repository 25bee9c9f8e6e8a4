"""Publishing a decided gate's report in the evidence library, with both parties' consent: the
vendor admin proposes, the customer owner approves (choosing how they are named and which host
details show), either withdraws. Every act is a consent record signed with the server's key,
append-only, and audited. The one writer of Publication and PublicationConsent rows. Django side.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError
from gates.evidence import keys, layout, published
from gates.evidence.redaction import HOST_DETAILS
from gates.evidence.store import envelope_digest
from gates.models import Decision, Membership, Organization, Publication, PublicationConsent
from gates.services.audit import Actor, audit_record
from gates.services.pokes import RENDER_LIBRARY_PDF, poke_on_commit
from gates.tenancy import Viewer

Role = Membership.Role
CONSENT_VERSION = "https://tollgate.dev/library/consent/v1"


def publication_propose(*, actor: Actor, viewer: Viewer, decision: Decision) -> Publication:
    """A vendor admin proposes the decision's report for the library; nothing is public yet."""
    vendor = _vendor_organization(viewer)
    if decision.gate.decisions.first() != decision:
        raise ServiceError("only a gate's latest decision can be published", field="decision")
    with transaction.atomic():
        open_ones = decision.publications.select_for_update().exclude(
            state=Publication.State.WITHDRAWN
        )
        if open_ones.exists():
            raise ServiceError("this report is already proposed or published", code="duplicate")
        publication = Publication.objects.create(decision=decision)
        terms = {"decision": decision.pk, "gate": decision.gate.kind}
        terms["evidence_envelope"] = envelope_digest(decision)
        _consent(actor, viewer, publication, "propose", "vendor", vendor, terms)
    return publication


def publication_approve(
    *,
    actor: Actor,
    viewer: Viewer,
    publication: Publication,
    naming: str,
    industry_label: str = "",
    host_details: list[str] | tuple[str, ...] = (),
) -> Publication:
    """The customer owner consents: the report is published, named and redacted as chosen."""
    customer = _customer_organization(viewer, publication)
    if naming not in Publication.Naming.values:
        raise ServiceError(f"naming must be one of {Publication.Naming.values}", field="naming")
    if naming == Publication.Naming.INDUSTRY and not industry_label.strip():
        raise ServiceError("an industry label is needed, e.g. 'a cloud provider'", field="naming")
    unknown = set(host_details) - set(HOST_DETAILS)
    if unknown:
        raise ServiceError(f"unknown host details {sorted(unknown)}", field="host_details")
    with transaction.atomic():
        publication = Publication.objects.select_for_update().get(pk=publication.pk)
        if publication.state != Publication.State.PROPOSED:
            raise IllegalTransitionError(f"this publication is {publication.state}")
        publication.naming = naming
        publication.industry_label = industry_label.strip()[:80]
        publication.host_details = sorted(set(host_details))
        _publish(publication, actor, viewer, customer)
    return publication


def publication_withdraw(
    *, actor: Actor, viewer: Viewer, publication: Publication, reason: str = ""
) -> Publication:
    """Either party withdraws: a published report's page then says so (and by whom, when)."""
    party, organization = _either_party(viewer, publication)
    with transaction.atomic():
        publication = Publication.objects.select_for_update().get(pk=publication.pk)
        if publication.state == Publication.State.WITHDRAWN:
            return publication  # withdrawn already: nothing more to record
        publication.state = Publication.State.WITHDRAWN
        publication.withdrawn_at = timezone.now()
        publication.withdrawn_by = party
        publication.withdrawal_reason = reason.strip()[:2000]
        publication.save()
        terms = {"reason": publication.withdrawal_reason}
        _consent(actor, viewer, publication, "withdraw", party, organization, terms)
    return publication


def _publish(
    publication: Publication, actor: Actor, viewer: Viewer, customer: Organization
) -> None:
    terms = published.redaction_terms(publication)
    proposer = publication.consents.filter(act="propose").select_related("organization").first()
    vendor_name = proposer.organization.name if proposer else "the vendor"
    record = published.public_record(publication, terms, vendor_name)
    published.refuse_record_leaks(record, terms)
    bundle = published.redacted_bundle(publication, terms)
    publication.record = record
    publication.bundle = bundle
    publication.bundle_sha256 = layout.sha256_hex(bundle)
    publication.state = Publication.State.PUBLISHED
    publication.published_at = timezone.now()
    publication.save()
    consent_terms = {
        "naming": publication.naming,
        "industry_label": publication.industry_label,
        "host_details": publication.host_details,
        "bundle_sha256": publication.bundle_sha256,
        "record_sha256": layout.sha256_hex(layout.canonical_json(record)),
    }
    _consent(actor, viewer, publication, "approve", "customer", customer, consent_terms)
    poke_on_commit(RENDER_LIBRARY_PDF, publication.pk)  # the public PDF, rendered once


def _consent(
    actor: Actor,
    viewer: Viewer,
    publication: Publication,
    act: str,
    party: str,
    organization: Organization,
    terms: dict,
) -> PublicationConsent:
    """The act as canonical JSON, signed with the server's evidence key, and audited. The
    payload names no one: it is shown in the library, whatever the customer chose."""
    at = timezone.now()
    document = {
        "type": CONSENT_VERSION,
        "publication": publication.slug,
        "act": act,
        "party": party,
        "terms": terms,
        "at": at.isoformat(),
    }
    payload = layout.canonical_json(document)
    key = keys.key_active()
    consent = PublicationConsent.objects.create(
        publication=publication,
        act=act,
        party=party,
        organization=organization,
        payload=payload,
        key=key,
        signature=keys.key_sign(key, payload),
        signed_by=viewer.user,
        signed_at=at,
    )
    audit_record(
        actor=actor,
        action=f"library.{act}",
        target=publication.decision.gate,
        organization_id=publication.decision.gate.engagement.organization_id,
        detail={"publication": publication.slug, "party": party, "terms": terms},
    )
    return consent


def _vendor_organization(viewer: Viewer) -> Organization:
    membership = next(
        (m for m in viewer.memberships if m.role == Role.VENDOR_ADMIN and viewer.token is None),
        None,
    )
    if membership is None:
        raise NotAllowedError("only a vendor admin proposes a report for the library")
    return membership.organization


def _customer_organization(viewer: Viewer, publication: Publication) -> Organization:
    organization_id = publication.decision.gate.engagement.organization_id
    membership = next(
        (
            m
            for m in viewer.memberships
            if m.role == Role.CUSTOMER_OWNER and m.organization_id == organization_id
        ),
        None,
    )
    if membership is None or viewer.token is not None:
        raise NotAllowedError("only the customer's owner approves publishing their test")
    return membership.organization


def _either_party(viewer: Viewer, publication: Publication) -> tuple[str, Organization]:
    try:
        return "customer", _customer_organization(viewer, publication)
    except NotAllowedError:
        pass
    try:
        return "vendor", _vendor_organization(viewer)
    except NotAllowedError:
        raise NotAllowedError(
            "only the customer's owner or a vendor admin withdraws a publication"
        ) from None


def publication_pdf_stored(
    publication_id: int, render: Callable[[Publication], bytes]
) -> tuple[bytes, str]:
    """The publication's PDF and its SHA-256 as stored, rendered by `render` first if it never
    was (a lost poke at approval). The row lock makes a second reader, or the worker, wait for
    the first render and then read its bytes: a public URL never renders the same report twice."""
    stored = (
        Publication.objects.filter(pk=publication_id)
        .exclude(pdf_sha256="")
        .values_list("pdf", "pdf_sha256")
        .first()
    )
    if stored is not None:
        return bytes(stored[0]), stored[1]
    with transaction.atomic():
        publication = Publication.objects.select_for_update().get(pk=publication_id)
        if not publication.pdf_sha256:
            document = render(publication)
            publication.pdf = document
            publication.pdf_sha256 = layout.sha256_hex(document)
            publication.save(update_fields=["pdf", "pdf_sha256"])
        return bytes(publication.pdf), publication.pdf_sha256
