"""The agreed bar through the services: signed by both means in force, rehearsals count for
nothing, proposals alert the other party with a diff, failures keep counting unless reset."""

from __future__ import annotations

import pytest

from gates import services
from gates.errors import NotAllowedError, ServiceError
from gates.models import Alert, AuditEvent, Decision, Gate, SpecSignature
from gates.models.appendonly import AppendOnlyError
from gates.selectors import gate_spec_in_force, gate_spec_proposed, spec_changes_from_force
from gates.services.contract.specs import StaleSpecError, SupersededSpecError
from gates.specs import validation as specs
from gates.tenancy import viewer_for_user

pytestmark = pytest.mark.django_db


def sign(user, spec, **options):
    return services.gate_spec_sign(
        actor=services.Actor(user=user), viewer=viewer_for_user(user), spec=spec, **options
    )


def decided(actor, viewer, gate, host, verdict: str) -> Decision:
    """A run of the gate's latest version, decided by the engine with `verdict`."""
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clause = {"check": "free_disk", "verdict": verdict, "cause": "2 GiB free, 500 expected"}
    return services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": [clause]})


@pytest.fixture
def g1(engagement) -> Gate:
    return engagement.gates.get(kind="G1")


@pytest.fixture
def signers(vendor_admin, customer_owner):
    return vendor_admin, customer_owner


class TestRehearsals:
    def test_a_run_on_a_version_signed_by_one_party_is_a_rehearsal(
        self, actor, vendor_viewer, vendor_admin, g1, host
    ):
        sign(vendor_admin, g1.current_spec)
        decision = decided(actor, vendor_viewer, g1, host, "pass")
        g1.refresh_from_db()
        assert decision.rehearsal and decision.runs.get().rehearsal
        assert (g1.state, g1.verdict) == (Gate.State.READY, "pending")
        assert g1.engagement.gates.get(kind="G2").state == Gate.State.LOCKED
        assert AuditEvent.objects.filter(action="gate.rehearse").count() == 1

    def test_rehearsal_failures_never_count_toward_stop_loss(self, actor, vendor_viewer, g1, host):
        for _ in range(3):
            assert decided(actor, vendor_viewer, g1, host, "fail").rehearsal
        g1.refresh_from_db()
        assert not g1.stop_loss_review and g1.verdict == "pending"
        assert not Alert.objects.filter(event__in=["gate_failed", "stop_loss_review"]).exists()

    def test_after_both_sign_the_same_decision_counts(
        self, actor, vendor_viewer, signers, g1, host
    ):
        vendor, customer = signers
        sign(vendor, g1.current_spec)
        assert decided(actor, vendor_viewer, g1, host, "pass").rehearsal
        spec = sign(customer, g1.current_spec)
        assert spec.in_force and gate_spec_in_force(g1) == spec
        counted = decided(actor, vendor_viewer, g1, host, "pass")
        g1.refresh_from_db()
        assert not counted.rehearsal and g1.verdict == "pass"
        assert g1.engagement.gates.get(kind="G2").state == Gate.State.READY

    def test_a_run_started_before_the_second_signature_stays_a_rehearsal(
        self, actor, vendor_viewer, signers, g1, host
    ):
        vendor, customer = signers
        sign(vendor, g1.current_spec)
        run = services.run_create(actor=actor, viewer=vendor_viewer, gate=g1, host=host)
        sign(customer, g1.current_spec)
        services.run_claim(run_id=run.pk)
        decision = services.decision_record(run_id=run.pk, result={"verdict": "pass"})
        assert decision.rehearsal
        assert g1.engagement.gates.get(kind="G2").state == Gate.State.LOCKED


class TestProposals:
    """The demo's story: a bar lowered after a failure is a proposal the customer must sign."""

    def lower_the_disk_bar(self, engineer, gate):
        document = gate.current_spec.document
        document["expect"]["free_disk_min_gib"] = 1
        return services.gate_spec_propose(
            actor=services.Actor(user=engineer), gate=gate, document=document
        ).spec

    def test_a_bar_lowered_after_a_failure_needs_the_customer(
        self, actor, vendor_viewer, signers, vendor_engineer, g1, host, customer_owner
    ):
        vendor, customer = signers
        sign(vendor, g1.current_spec)
        sign(customer, g1.current_spec)
        assert decided(actor, vendor_viewer, g1, host, "fail").verdict == "fail"
        v2 = self.lower_the_disk_bar(vendor_engineer, g1)

        assert gate_spec_proposed(g1) == v2 and gate_spec_in_force(g1).version == 1
        changes = [str(c) for c in spec_changes_from_force(g1, v2)]
        assert changes == ["expect.free_disk_min_gib: 500 -> 1"]
        alert = Alert.objects.get(event="spec_proposed")
        assert alert.recipients == [customer_owner.email]  # the other party, not the proposer
        assert "the vendor proposed a new G1 spec" in alert.subject
        assert "Free disk, at least: 500 GiB → 1 GiB" in alert.subject
        assert "- Free disk, at least: 500 GiB → 1 GiB" in alert.body and v2.digest in alert.body

        assert decided(actor, vendor_viewer, g1, host, "pass").rehearsal  # not in force yet
        sign(vendor, v2)
        assert not v2.in_force
        sign(customer, v2)
        assert v2.in_force and gate_spec_proposed(g1) is None

    def test_failures_under_the_old_version_still_count_under_the_new_one(
        self, actor, vendor_viewer, signers, vendor_engineer, g1, host
    ):
        vendor, customer = signers
        sign(vendor, g1.current_spec)
        sign(customer, g1.current_spec)
        decided(actor, vendor_viewer, g1, host, "fail")
        v2 = self.lower_the_disk_bar(vendor_engineer, g1)
        sign(vendor, v2)
        sign(customer, v2)
        decided(actor, vendor_viewer, g1, host, "fail")  # max_attempts is 2
        g1.refresh_from_db()
        assert g1.stop_loss_review
        assert Alert.objects.filter(event="stop_loss_review").count() == 1

    def test_a_reset_both_parties_sign_clears_the_count_and_is_audited(
        self, actor, vendor_viewer, signers, g1, host
    ):
        vendor, customer = signers
        sign(vendor, g1.current_spec)
        sign(customer, g1.current_spec)
        for _ in range(2):
            decided(actor, vendor_viewer, g1, host, "fail")
        reason = "the disk was full of an old run's cache; cleaned, agreed on a call"
        viewer = viewer_for_user(vendor)
        with pytest.raises(ServiceError) as short:
            services.stop_loss_reset_sign(
                actor=services.Actor(user=vendor), viewer=viewer, gate=g1, reason="ok"
            )
        assert short.value.field == "reason"
        pending = services.stop_loss_reset_sign(
            actor=services.Actor(user=vendor), viewer=viewer, gate=g1, reason=reason
        )
        assert pending.effective_at is None and Gate.objects.get(pk=g1.pk).stop_loss_review
        done = services.stop_loss_reset_sign(
            actor=services.Actor(user=customer),
            viewer=viewer_for_user(customer),
            gate=g1,
            reason="",
        )
        assert done.effective_at is not None and done.reason == reason
        g1.refresh_from_db()
        assert not g1.stop_loss_review
        audited = (
            AuditEvent.objects.filter(action="gate.reset.sign")
            .order_by("id")
            .values_list("detail", flat=True)
        )
        assert [d["party"] for d in audited] == ["vendor", "customer"]
        assert all(d["reason"] == reason for d in audited)
        decided(actor, vendor_viewer, g1, host, "fail")  # one failure since the reset
        assert not Gate.objects.get(pk=g1.pk).stop_loss_review


class TestExactVersions:
    def test_an_identical_document_makes_no_new_version(self, actor, g1):
        document = g1.current_spec.document
        document["version"] = 41  # the version number is not part of what is compared
        change = services.gate_spec_propose(actor=actor, gate=g1, document=document)
        again = services.gate_spec_propose(actor=actor, gate=g1, document=dict(document))
        assert (change.created, again.created) == (False, False)
        assert change.spec.version == 1 and g1.specs.count() == 1

    def test_a_stale_if_match_is_refused_and_writes_nothing(self, actor, g1):
        stale = g1.current_spec.digest
        document = g1.current_spec.document
        document["expect"]["gpu_count"] = 4
        services.gate_spec_propose(actor=actor, gate=g1, document=document, if_match=stale)
        document["expect"]["gpu_count"] = 2
        with pytest.raises(StaleSpecError) as refused:
            services.gate_spec_propose(actor=actor, gate=g1, document=document, if_match=stale)
        assert refused.value.status == 412 and g1.specs.count() == 2

    def test_signing_a_superseded_version_is_refused(self, actor, vendor_admin, g1):
        v1 = g1.current_spec
        document = v1.document
        document["expect"]["gpu_count"] = 4
        services.gate_spec_update(actor=actor, gate=g1, document=document)
        with pytest.raises(SupersededSpecError) as refused:
            sign(vendor_admin, v1)
        assert refused.value.field == "version" and "superseded by v2" in refused.value.detail
        assert not SpecSignature.objects.exists()

    def test_a_signature_names_the_digest_it_was_given_for(self, vendor_admin, g1):
        spec = g1.current_spec
        with pytest.raises(SupersededSpecError) as refused:
            sign(vendor_admin, spec, digest="0" * 64)
        assert refused.value.field == "digest"
        sign(vendor_admin, spec, digest=spec.digest)
        signature = SpecSignature.objects.get()
        assert signature.digest == spec.digest == specs.spec_digest(spec.document)
        with pytest.raises(AppendOnlyError):
            signature.delete()

    def test_signing_twice_keeps_one_signature(self, vendor_admin, g1):
        sign(vendor_admin, g1.current_spec)
        sign(vendor_admin, g1.current_spec)
        assert SpecSignature.objects.count() == 1


@pytest.mark.parametrize(
    "role, party",
    [
        ("vendor_admin", "vendor"),
        ("vendor_engineer", None),
        ("customer_owner", "customer"),
        ("customer_viewer", None),
    ],
)
def test_only_a_vendor_admin_and_a_customer_owner_sign(request, role, party, g1):
    user = request.getfixturevalue(role)
    if party is None:
        with pytest.raises(NotAllowedError):
            sign(user, g1.current_spec)
        assert not SpecSignature.objects.exists()
    else:
        sign(user, g1.current_spec)
        assert SpecSignature.objects.get().party == party
