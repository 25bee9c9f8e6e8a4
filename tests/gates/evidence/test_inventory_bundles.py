"""Bundles of a G3 decided while an amended host inventory was in force: the amendment with both
parties' signatures (the customer's with their own registered key) is a signed member, the
verifier names each kind of tampering with it, an amendment signed after the decision (or while
the run was under way) is not its basis, and a bundle sealed before amendments were carried
still verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from gates import services
from gates.evidence import bundle_for_decision, layout, store
from gates.evidence.verify import verify_bundle
from gates.models import EvidenceKey, InventoryAmendment
from gates.services.contract.inventory import amendment_digest
from gates.specs.validation import inventory_digest
from gates.tenancy import viewer_for_user
from tests.gates.evidence.helpers import (
    edited_json,
    g1_upload_decision,
    g3_upload_decision,
    resealed,
)
from tests.gates.evidence.test_bundles import problems_of, server_key
from tests.gates.evidence.test_verifier_cli import isolated
from tests.gates.services.test_uploads import g3_upload_gate, pass_gate, upload_cell, upload_run
from tests.gates.test_sshsig import keygen, needs_ssh_keygen, ssh_sign

pytestmark = [pytest.mark.django_db, needs_ssh_keygen]
AMENDMENTS = layout.INVENTORY_AMENDMENTS
REASON = "the customer updated the NVIDIA driver on this host, as agreed in the kickoff call"
G1_DRIVER = "535.54.03"  # the A100 capture G1's upload was decided on


def as_user(user) -> dict:
    return {"actor": services.Actor(user=user), "viewer": viewer_for_user(user)}


class Parties:
    """The vendor admin signs through their account; the customer owner with their own key."""

    def __init__(self, vendor_admin, customer_owner, folder: Path):
        self.vendor, self.customer, self.folder = vendor_admin, customer_owner, folder
        self.key = keygen(folder, "customer")
        public = Path(f"{self.key}.pub").read_text()
        self.registered = services.party_key_register(public_key=public, **as_user(customer_owner))

    def propose(self, engagement, source_run, **changes) -> InventoryAmendment:
        # Straight to the row: an upload run has no re-probe for inventory_amendment_propose
        # to read; test_inventory_amendment.py proposes from a real invalid run.
        inventory = {**services.accepted_inventory(engagement), **changes}
        return InventoryAmendment.objects.create(
            engagement=engagement,
            inventory=inventory,
            digest=amendment_digest(engagement, inventory),
            reason=REASON,
            source_run=source_run,
            proposed_by=self.vendor,
        )

    def sign(self, amendment, party: str) -> None:
        if party == "vendor":
            options = as_user(self.vendor)
        else:
            signature = ssh_sign(self.key, amendment.digest, self.folder)
            options = {"ssh_signature": signature, **as_user(self.customer)}
        services.inventory_amendment_sign(amendment=amendment, digest=amendment.digest, **options)

    def sign_both(self, amendment) -> InventoryAmendment:
        self.sign(amendment, "vendor")
        self.sign(amendment, "customer")
        return InventoryAmendment.objects.get(pk=amendment.pk)


@pytest.fixture
def parties(vendor_admin, customer_owner, tmp_path) -> Parties:
    return Parties(vendor_admin, customer_owner, tmp_path)


@pytest.fixture
def g1_passed(api, actor, vendor_viewer, engagement, host):
    """G1 decided on real probe files, G2 passed: the G1 run (an amendment's source here)."""
    g1 = g1_upload_decision(api, actor, engagement)
    pass_gate(actor, vendor_viewer, engagement, "G2", host)
    return g1.runs.get()


def g3_decided(api, actor, vendor_viewer, engagement, host):
    return g3_upload_decision(api, actor, vendor_viewer, engagement, host, passed=())


@pytest.fixture
def amended(api, actor, vendor_viewer, engagement, host, parties, g1_passed):
    """(bundle, amendment): G3 decided after both parties signed a driver update."""
    amendment = parties.sign_both(
        parties.propose(engagement, g1_passed, driver_version="550.90.07")
    )
    data, _ = bundle_for_decision(g3_decided(api, actor, vendor_viewer, engagement, host))
    return data, amendment


def test_a_g3_decided_after_a_signed_amendment_carries_it_and_verifies(amended, parties):
    data, amendment = amended
    members = layout.read_zip(data)
    record = json.loads(members[AMENDMENTS])
    assert record["in_force"] == amendment.digest
    [carried] = record["amendments"]
    assert carried["inventory"]["driver_version"] == "550.90.07"
    assert (carried["digest"], carried["reason"]) == (amendment.digest, REASON)
    assert carried["source_run"]["gate"] == "G1"
    signatures = {row["party"]: row for row in carried["signatures"]}
    assert set(signatures) == {"vendor", "customer"}
    assert signatures["vendor"]["ssh_signature"] == ""
    customer = signatures["customer"]
    assert customer["key_fingerprint"] == parties.registered.fingerprint
    assert customer["public_key"] == parties.registered.public_key
    # g1.json stays what G1 accepted; the amendment is what the run was held to.
    assert json.loads(members[layout.INVENTORY])["driver_version"] == G1_DRIVER
    report = verify_bundle(data, public_key=server_key())
    assert report.ok, report.problems
    named = f"inventory amendment 1 ({amendment.digest[:12]})"
    assert f"{named}: its digest and both parties' signatures over it verify" in report.notes
    assert (
        f"{named}: the customer's signature: SSH signature by "
        f"{parties.registered.fingerprint} verifies" in report.notes
    )
    held = f"inventory: the run was held to amendment {amendment.digest[:12]}, in force when it"
    assert any(note.startswith(held) for note in report.notes), report.notes


def amendment_edit(edit):
    """A dishonest server's change to the carried amendment, signed again with its key."""

    def change(members):
        edited_json(members, AMENDMENTS, lambda record: edit(record, record["amendments"][0]))

    return change


def party(amendment: dict, name: str) -> dict:
    return next(row for row in amendment["signatures"] if row["party"] == name)


def covered_tracks(record: dict, amendment: dict) -> None:
    """Another inventory with its digest recomputed, and every row moved to the new digest:
    only the customer's own SSH signature is left to say it was not what they signed."""
    amendment["inventory"]["gpu_count"] = 8
    digest = inventory_digest(record["engagement"], amendment["inventory"])
    amendment["digest"] = record["in_force"] = digest
    for row in amendment["signatures"]:
        row["digest"] = digest


def other_key_listed(record: dict, amendment: dict) -> None:
    party(amendment, "customer")["public_key"] = EvidenceKey.objects.get().public_key


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda record, a: a["inventory"].update(driver_version="999.0"),
            "{who}: digest {digest} is not the SHA-256 of its canonical engagement and inventory",
        ),
        (covered_tracks, "{new}: the customer's signature: the signature does not verify"),
        (
            lambda record, a: party(a, "vendor").update(digest="0" * 64),
            "{who}: the vendor's signature is over digest " + "0" * 64 + ", not its own",
        ),
        (
            lambda record, a: a["signatures"].remove(party(a, "vendor")),
            "{who}: not signed by the vendor",
        ),
        (
            lambda record, a: party(a, "customer").update(signed_at="2999-01-01T00:00:00+00:00"),
            "{who}: the customer's signature was given at 2999-01-01T00:00:00+00:00, after the "
            "run was held to it",
        ),
        (other_key_listed, "{who}: the customer's signature: SSH signature made with key"),
        (
            lambda record, a: record.update(amendments=[]),
            "member " + AMENDMENTS + ": in_force '{digest}' is not the newest amendment",
        ),
    ],
    ids=[
        "inventory-edited",
        "digest-recomputed-too",
        "signature-over-another-digest",
        "signature-dropped",
        "signature-after-the-decision",
        "another-public-key-listed",
        "amendment-hidden",
    ],
)
def test_an_amendment_edited_and_signed_again_by_the_server_is_named(amended, edit, expected):
    data, amendment = amended
    tampered = resealed(data, amendment_edit(edit))
    new = json.loads(layout.read_zip(tampered)[AMENDMENTS])["amendments"]
    who = f"inventory amendment 1 ({amendment.digest[:12]})"
    fields = {"who": who, "digest": amendment.digest}
    fields["new"] = f"inventory amendment 1 ({new[0]['digest'][:12]})" if new else who
    problems = problems_of(tampered)
    assert any(p.startswith(expected.format(**fields)) for p in problems), problems


def test_a_customer_ssh_signature_over_another_digest_is_named(amended, parties):
    data, amendment = amended
    other = ssh_sign(parties.key, "0" * 64, parties.folder)
    tampered = resealed(
        data,
        amendment_edit(lambda record, a: party(a, "customer").update(ssh_signature=other)),
    )
    who = f"inventory amendment 1 ({amendment.digest[:12]}): the customer's signature"
    assert f"{who}: the signature does not verify for this digest" in problems_of(tampered)


def test_an_amendment_signed_after_the_decision_is_not_its_basis(
    api, actor, vendor_viewer, engagement, host, parties, g1_passed
):
    first = parties.sign_both(parties.propose(engagement, g1_passed, driver_version="550.90.07"))
    second = parties.propose(engagement, g1_passed, vllm_version="0.26.0")
    parties.sign(second, "vendor")
    decision = g3_decided(api, actor, vendor_viewer, engagement, host)
    parties.sign(second, "customer")  # in force from now on, after the verdict
    assert services.accepted_inventory(engagement)["vllm_version"] == "0.26.0"

    data, _ = bundle_for_decision(decision)  # sealed now, read as of the decision
    record = json.loads(layout.read_zip(data)[AMENDMENTS])
    assert [a["digest"] for a in record["amendments"]] == [first.digest]
    assert record["in_force"] == first.digest
    assert record["as_of"] == decision.runs.get().started_at.isoformat()
    assert verify_bundle(data, public_key=server_key()).ok


def test_an_amendment_signed_while_the_run_was_under_way_is_not_its_basis(
    api, actor, vendor_viewer, engagement, host, parties, g1_passed
):
    gate = g3_upload_gate(actor, vendor_viewer, engagement, host, passed=())
    run = upload_run(api, gate)  # a run keeps the inventory it started with
    parties.sign_both(parties.propose(engagement, g1_passed, driver_version="550.90.07"))
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            assert upload_cell(api, run["id"], arm, repetition).status_code == 201
    assert api.post(reverse("api:run-decide", args=[run["id"]])).status_code == 200

    data, _ = bundle_for_decision(gate.decisions.get())
    record = json.loads(layout.read_zip(data)[AMENDMENTS])
    assert (record["amendments"], record["in_force"]) == ([], None)
    assert verify_bundle(data, public_key=server_key()).ok


def test_a_bundle_without_amendments_says_the_runs_were_held_to_g1(
    api, actor, vendor_viewer, engagement, host, g1_passed
):
    data, _ = bundle_for_decision(g3_decided(api, actor, vendor_viewer, engagement, host))
    record = json.loads(layout.read_zip(data)[AMENDMENTS])
    assert (record["amendments"], record["in_force"]) == ([], None)
    report = verify_bundle(data, public_key=server_key())
    assert report.ok, report.problems
    expected = f"no amendment in force when the run started; held to {layout.INVENTORY}"
    assert any(expected in note for note in report.notes)


def test_a_bundle_sealed_before_amendments_were_carried_still_verifies(
    api, actor, vendor_viewer, engagement, host, parties, g1_passed
):
    parties.sign_both(parties.propose(engagement, g1_passed, driver_version="550.90.07"))
    decision = g3_decided(api, actor, vendor_viewer, engagement, host)
    # The snapshot a seal made before this release holds: the inventory in force at sealing.
    old = {
        "versions": {"tollgate": "earlier"},
        "inventory": services.accepted_inventory(engagement),
        "soak_windows": True,
    }
    store.seal_create(decision, old)
    data, _ = bundle_for_decision(decision)
    members = layout.read_zip(data)
    assert AMENDMENTS not in members
    assert json.loads(members[layout.INVENTORY])["driver_version"] == "550.90.07"
    report = verify_bundle(data, public_key=server_key())
    assert report.ok, report.problems
    assert any(
        note.startswith(f"member {AMENDMENTS}: absent (sealed before") for note in report.notes
    )


def test_the_standalone_verifier_checks_the_amendment_without_django(amended, tmp_path):
    data, amendment = amended
    bundle, key = tmp_path / "g3.zip", tmp_path / "server.pub"
    bundle.write_bytes(data)
    key.write_text(EvidenceKey.objects.get().public_key)
    result = isolated(str(bundle), "--public-key", str(key))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok   inventory amendment 1 ({amendment.digest[:12]}): its digest" in result.stdout


def host_check_invalid(actor, vendor_viewer, engagement, host, accepted: str):
    """A G3 run the host check ended invalid (what worker.tasks records on a ContractError)."""
    gate = g3_upload_gate(actor, vendor_viewer, engagement, host, passed=())
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    change = {"field": "driver_version", "accepted": accepted, "observed": "560.35.03"}
    services.run_invalid(run_id=run.pk, reason="the host differs", differences=[change])
    return run.decisions.get()


def test_a_host_check_decision_is_checked_against_the_amendment_in_force(
    actor, vendor_viewer, engagement, host, parties, g1_passed
):
    parties.sign_both(parties.propose(engagement, g1_passed, driver_version="550.90.07"))
    decision = host_check_invalid(actor, vendor_viewer, engagement, host, accepted="550.90.07")
    data, _ = bundle_for_decision(decision)
    report = verify_bundle(data, public_key=server_key())
    assert report.ok, report.problems
    # Recorded here without a host check, as a bundle sealed before checks kept their files.
    assert any(
        note.startswith("a host-check decision whose probe outputs were not kept")
        for note in report.notes
    )

    def compared_with_g1(members):
        edited_json(members, layout.DECISION, lambda d: d["clauses"][0].update(expected=G1_DRIVER))

    assert (
        "decision/decision.json clauses[0] (inventory.driver_version): accepted "
        f"'{G1_DRIVER}', but the inventory the run was held to has '550.90.07'"
    ) in problems_of(resealed(data, compared_with_g1))
