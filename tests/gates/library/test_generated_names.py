"""Redaction end to end with generated names (as the alert tests generate them): whatever the
customer, its people and its hosts are called, no published page, feed or bundle member (nor the
signed statement) holds their names, host names or addresses, and the bundle still verifies."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gates.evidence import bundle_for_decision, layout, statement
from gates.evidence import publication as publishing
from gates.evidence.verify import verify_bundle
from gates.models import EvidenceKey, Host, Membership, Publication

pytestmark = pytest.mark.django_db

NAME = st.text(alphabet=st.characters(categories=("L",)), min_size=5, max_size=24)
ADDRESS = st.tuples(*[st.integers(1, 254)] * 3).map(lambda t: "10.{}.{}.{}".format(*t))


def texts_of_bundle(data: bytes) -> str:
    members = layout.read_zip(data)
    envelope = json.loads(members[layout.ENVELOPE])
    payload = base64.b64decode(envelope["payload"]).decode()
    return "\n".join([payload, *(m.decode(errors="replace") for m in members.values())])


@pytest.fixture
def baseline(g3_decision) -> str:
    """The evidence and the pages with neutral names: a generated name that is already a word
    of them (a JSON key, a metric) cannot be told apart from it, so it is not drawn."""
    page = Client().get(reverse("gates:library")).content.decode()
    return (texts_of_bundle(bundle_for_decision(g3_decision)[0]) + page).casefold()


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    customer=NAME,
    person=NAME,
    host=NAME,
    address=ADDRESS,
    naming=st.sampled_from(["anonymous", "industry"]),
)
def test_generated_names_never_reach_the_public_section(
    g3_decision,
    baseline,
    actor,
    vendor_viewer,
    owner_actor,
    owner_viewer,
    customer,
    person,
    host,
    address,
    naming,
):
    names = [customer, person, host]
    assume(len({n.casefold() for n in names}) == 3)
    assume(not any(a.casefold() in b.casefold() for a in names for b in names if a != b))
    assume(not any(n.casefold() in baseline for n in names))
    engagement = g3_decision.gate.engagement
    organization = engagement.organization
    organization.name, organization.slug = f"{customer} Holdings", customer
    organization.save()
    for membership in Membership.objects.filter(organization=organization).select_related("user"):
        membership.user.first_name = person
        membership.user.save()
    Host.objects.filter(organization=organization).update(name=host, address=address)
    engagement.platform = f"8x H200 at {customer} ({host}.{customer}.internal, {address})"
    engagement.save()

    publication = publishing.publication_propose(
        actor=actor, viewer=vendor_viewer, decision=g3_decision
    )
    publishing.publication_approve(
        actor=owner_actor,
        viewer=owner_viewer,
        publication=publication,
        naming=naming,
        industry_label="a research lab",
    )
    publication.refresh_from_db()
    anonymous = Client(REMOTE_ADDR=address)
    seen = [
        anonymous.get(reverse("gates:library")).content.decode(),
        anonymous.get(reverse("gates:library-report", args=[publication.slug])).content.decode(),
        json.dumps(publication.record, ensure_ascii=False),
        texts_of_bundle(bytes(publication.bundle)),
    ]
    secrets = [customer, f"{customer} Holdings", person, host, address]
    for text in seen:
        folded = text.casefold()
        for placeholder in ("[customer]", "[person]", "[host]", "[address]"):
            folded = folded.replace(placeholder, " ")
        assert not [s for s in secrets if s.casefold() in folded]
    key = statement.load_public_key(EvidenceKey.objects.get().public_pem)
    assert verify_bundle(bytes(publication.bundle), public_key=key).ok
    assert (
        "[host]" in publication.record["platform"] and "[address]" in publication.record["platform"]
    )
    publishing.publication_withdraw(actor=actor, viewer=vendor_viewer, publication=publication)
    assert Publication.objects.filter(state="published").count() == 0
