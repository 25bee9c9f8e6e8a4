"""Publishing a report needs both parties: the vendor admin proposes, the customer owner
approves with the naming and host details they choose; either withdraws; every act is a signed,
append-only, audited consent record; the published bundle is redacted and still verifies."""

from __future__ import annotations

import base64
import json

import pytest

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError
from gates.evidence import layout, statement
from gates.evidence import publication as publishing
from gates.evidence.verify import verify_bundle
from gates.models import AuditEvent, EvidenceKey, Publication, PublicationConsent
from gates.models.appendonly import AppendOnlyError
from gates.pages.library.public import consent_envelope
from gates.tenancy import viewer_for_user

pytestmark = pytest.mark.django_db


def server_key():
    return statement.load_public_key(EvidenceKey.objects.get().public_pem)


def test_a_proposal_is_not_published_until_the_customer_owner_approves(proposed):
    assert proposed.state == "proposed" and proposed.published_at is None
    assert not proposed.bundle and not proposed.record
    assert [c.act for c in proposed.consents.all()] == ["propose"]


def test_only_a_vendor_admin_proposes(g3_decision, owner_actor, owner_viewer, vendor_engineer):
    with pytest.raises(NotAllowedError):
        publishing.publication_propose(actor=owner_actor, viewer=owner_viewer, decision=g3_decision)
    with pytest.raises(NotAllowedError):
        publishing.publication_propose(
            actor=owner_actor, viewer=viewer_for_user(vendor_engineer), decision=g3_decision
        )


def test_a_report_is_proposed_once_until_withdrawn(actor, vendor_viewer, proposed):
    with pytest.raises(ServiceError, match="already proposed"):
        publishing.publication_propose(
            actor=actor, viewer=vendor_viewer, decision=proposed.decision
        )


def test_only_the_engagement_s_customer_owner_approves(
    actor, vendor_viewer, proposed, customer_viewer, other_owner
):
    for viewer in (vendor_viewer, viewer_for_user(customer_viewer), viewer_for_user(other_owner)):
        with pytest.raises(NotAllowedError):
            publishing.publication_approve(
                actor=actor, viewer=viewer, publication=proposed, naming="anonymous"
            )


def test_approval_publishes_a_redacted_bundle_that_verifies_and_recomputes(published):
    assert published.state == "published" and published.published_at is not None
    bundle = bytes(published.bundle)
    assert layout.sha256_hex(bundle) == published.bundle_sha256
    report = verify_bundle(bundle, public_key=server_key())
    assert report.ok, report.problems
    assert any("recomputed from its raw files to pass" in n for n in report.notes)
    assert any("a redacted copy" in n for n in report.notes)
    members = layout.read_zip(bundle)
    assert json.loads(members[layout.INVENTORY]) is None  # an upload G3: no G1 inventory
    signatures = json.loads(members[layout.SPEC_SIGNATURES])
    assert {s["signed_by"] for s in signatures} == {"[customer]", "[vendor]"}


def test_the_record_shows_the_clauses_and_the_chosen_name(published, customer_org):
    record = published.record
    assert record["customer"] == "a cloud provider" and record["gate"] == "G3"
    clause = record["clauses"][0]
    assert clause["metric"] == "ttft_p50" and clause["low"] < clause["estimate"] < clause["high"]
    assert customer_org.name not in json.dumps(record)
    assert set(record["host_details"]) <= {"gpu_models", "gpu_count"}


def test_undoing_a_redaction_breaks_the_bundle(published):
    members = layout.read_zip(bytes(published.bundle))
    signatures = members[layout.SPEC_SIGNATURES]
    members[layout.SPEC_SIGNATURES] = signatures.replace(b"[customer]", b"cowner")
    problems = verify_bundle(layout.write_zip(members), public_key=server_key()).problems
    assert f"member {layout.SPEC_SIGNATURES}: SHA-256 differs from the signed statement" in problems


def test_each_consent_is_signed_by_the_server_key_and_append_only(published):
    consents = list(published.consents.order_by("id"))
    assert [(c.act, c.party) for c in consents] == [("propose", "vendor"), ("approve", "customer")]
    for consent in consents:
        envelope = consent_envelope(consent)
        assert statement.verify_envelope(envelope, server_key()) == consent.key.fingerprint
        envelope["payload"] = base64.b64encode(bytes(consent.payload) + b" ").decode()
        with pytest.raises(statement.EnvelopeError, match="does not verify"):
            statement.verify_envelope(envelope, server_key())
    approval = json.loads(bytes(consents[1].payload))
    assert approval["terms"]["bundle_sha256"] == published.bundle_sha256
    assert approval["terms"]["naming"] == "industry"
    with pytest.raises(AppendOnlyError):
        consents[0].delete()
    with pytest.raises(AppendOnlyError):
        PublicationConsent.objects.filter(pk=consents[0].pk).update(act="approve")


def test_every_act_is_audited(published, owner_actor, owner_viewer):
    publishing.publication_withdraw(
        actor=owner_actor, viewer=owner_viewer, publication=published, reason="changed our mind"
    )
    actions = list(
        AuditEvent.objects.filter(action__startswith="library.").values_list("action", flat=True)
    )
    assert sorted(actions) == ["library.approve", "library.propose", "library.withdraw"]


def test_either_party_withdraws_and_the_record_stays(published, actor, vendor_viewer):
    withdrawn = publishing.publication_withdraw(
        actor=actor, viewer=vendor_viewer, publication=published, reason="superseded"
    )
    assert withdrawn.state == "withdrawn" and withdrawn.withdrawn_by == "vendor"
    assert withdrawn.published_at is not None and withdrawn.record
    again = publishing.publication_withdraw(
        actor=actor, viewer=vendor_viewer, publication=withdrawn
    )
    assert again.consents.filter(act="withdraw").count() == 1


def test_a_withdrawn_proposal_cannot_be_approved(proposed, owner_actor, owner_viewer):
    publishing.publication_withdraw(actor=owner_actor, viewer=owner_viewer, publication=proposed)
    with pytest.raises(IllegalTransitionError):
        publishing.publication_approve(
            actor=owner_actor, viewer=owner_viewer, publication=proposed, naming="anonymous"
        )
    assert Publication.objects.get().published_at is None


def test_an_industry_label_is_required_for_industry_naming(proposed, owner_actor, owner_viewer):
    with pytest.raises(ServiceError, match="industry label"):
        publishing.publication_approve(
            actor=owner_actor, viewer=owner_viewer, publication=proposed, naming="industry"
        )
