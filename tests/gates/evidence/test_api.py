"""The evidence over HTTP: the zip (scoped like every object), co-signing with a registered
key, the public keys with their validity, and the gate page's download link and fingerprint."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.urls import reverse

from gates import services
from gates.evidence import layout, statement
from gates.evidence.verify import verify_bundle
from gates.models import AuditEvent, EvidenceKey, EvidenceSignature
from tests.gates.evidence.helpers import g1_upload_decision
from tests.gates.test_sshsig import keygen, needs_ssh_keygen, ssh_sign
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided_gate(api, actor, engagement):
    return g1_upload_decision(api, actor, engagement).gate


def download(client, gate):
    response = client.get(reverse("api:gate-evidence", args=[gate.pk]))
    assert response.status_code == 200, response.content
    return response


def test_the_zip_comes_with_its_digest_as_etag_and_a_file_name(api, decided_gate):
    response = download(api, decided_gate)
    data = response.content
    assert response["Content-Type"] == "application/zip"
    assert response["ETag"] == f'"{layout.sha256_hex(data)}"'
    assert 'attachment; filename="tollgate-g1-gate' in response["Content-Disposition"]
    assert zipfile.ZipFile(io.BytesIO(data)).testzip() is None
    again = api.get(
        reverse("api:gate-evidence", args=[decided_gate.pk]), HTTP_IF_NONE_MATCH=response["ETag"]
    )
    assert again.status_code == 304


def test_another_organizations_gate_evidence_is_a_404(
    decided_gate, other_owner, other_customer_org
):
    stranger = token_client(other_owner, other_customer_org, ["read"])
    response = stranger.get(reverse("api:gate-evidence", args=[decided_gate.pk]))
    assert response.status_code == 404


def test_an_undecided_gate_has_no_evidence_yet(api, engagement):
    response = api.get(reverse("api:gate-evidence", args=[engagement.gates.get(kind="G2").pk]))
    assert response.status_code == 404 and "no decision yet" in response.json()["detail"]


@needs_ssh_keygen
def test_a_customer_co_signature_verifies_with_their_key_and_not_another(
    api, decided_gate, customer_owner, customer_org, tmp_path
):
    owner = token_client(customer_owner, customer_org, ["read", "sign"])
    key = keygen(tmp_path, "customer")
    registered = owner.post(
        reverse("api:party-keys"),
        {"public_key": key.with_suffix(".pub").read_text()},
        format="json",
    )
    assert registered.status_code == 201, registered.json()
    pae = layout.read_zip(download(api, decided_gate).content)[layout.TO_COSIGN]
    signature = ssh_sign(key, pae.decode("latin-1"), tmp_path, namespace=statement.COSIGN_NAMESPACE)
    url = reverse("api:gate-evidence-signatures", args=[decided_gate.pk])
    response = owner.post(url, {"ssh_signature": signature}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["party"] == "customer"
    assert AuditEvent.objects.filter(action="evidence.cosign").count() == 1

    data = download(api, decided_gate).content
    rows = json.loads(layout.read_zip(data)[layout.COSIGNATURES])
    assert [(r["party"], r["organization"]) for r in rows] == [("customer", customer_org.slug)]
    server = statement.load_public_key(EvidenceKey.objects.get().public_pem)
    theirs = statement.load_public_key(key.with_suffix(".pub").read_text())
    assert verify_bundle(data, public_key=server, party_keys=(theirs,)).ok
    other = statement.load_public_key(keygen(tmp_path, "other").with_suffix(".pub").read_text())
    problems = verify_bundle(data, public_key=server, party_keys=(other,)).problems
    assert problems == [f"co-signature by key {statement.key_fingerprint(other)}: none verifies"]

    twice = owner.post(url, {"ssh_signature": signature}, format="json")
    assert twice.status_code == 400 and twice.json()["field"] == "ssh_signature"
    assert EvidenceSignature.objects.count() == 1


@needs_ssh_keygen
def test_a_co_signature_with_an_unregistered_key_or_over_other_bytes_is_refused(
    api, decided_gate, customer_owner, customer_org, tmp_path
):
    owner = token_client(customer_owner, customer_org, ["read", "sign"])
    url = reverse("api:gate-evidence-signatures", args=[decided_gate.pk])
    key = keygen(tmp_path, "unregistered")
    pae = layout.read_zip(download(api, decided_gate).content)[layout.TO_COSIGN]
    signed = ssh_sign(key, pae.decode("latin-1"), tmp_path, namespace=statement.COSIGN_NAMESPACE)
    response = owner.post(url, {"ssh_signature": signed}, format="json")
    assert response.status_code == 400 and "not registered" in response.json()["detail"]
    wrong = ssh_sign(key, "other bytes", tmp_path, namespace=statement.COSIGN_NAMESPACE)
    response = owner.post(url, {"ssh_signature": wrong}, format="json")
    assert response.status_code == 400 and "does not verify" in response.json()["detail"]
    assert not EvidenceSignature.objects.exists()


def test_rotation_keeps_the_old_key_listed_and_old_bundles_verifying(api, decided_gate):
    first = download(api, decided_gate).content
    old = EvidenceKey.objects.get()
    call_command("rotate_evidence_key", stdout=io.StringIO())
    keys = api.get(reverse("api:evidence-keys")).json()["results"]
    listed = {row["fingerprint"]: row for row in keys}
    new = EvidenceKey.objects.exclude(pk=old.pk).get()
    assert listed[old.fingerprint]["valid_now"] is False and listed[old.fingerprint]["retired_at"]
    assert listed[new.fingerprint]["valid_now"] is True
    assert "private" not in json.dumps(listed)
    assert download(api, decided_gate).content == first  # sealed once, by the old key
    assert verify_bundle(first, public_key=statement.load_public_key(old.public_pem)).ok


def test_the_stored_private_key_is_encrypted(api, decided_gate):
    download(api, decided_gate)
    key = EvidenceKey.objects.get()
    assert key.source == "database" and len(bytes(key.private_key_encrypted)) > 32
    assert key.public_pem.encode() not in bytes(key.private_key_encrypted)


def test_the_gate_page_links_the_bundle_and_shows_the_key_fingerprint(
    client, api, decided_gate, customer_owner
):
    download(api, decided_gate)
    client.force_login(customer_owner)
    page = client.get(reverse("gates:gate-detail", args=[decided_gate.pk])).content.decode()
    assert reverse("api:gate-evidence", args=[decided_gate.pk]) in page
    assert EvidenceKey.objects.get().fingerprint in page


def test_a_run_s_bundle_on_request_is_its_decision_s_or_its_records_so_far(
    api, decided_gate, engagement, actor, vendor_viewer, host
):
    run = decided_gate.runs.get()
    by_run = api.get(reverse("api:run-evidence", args=[run.pk]))
    assert by_run.status_code == 200
    assert by_run.content == download(api, decided_gate).content

    queued = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G2"), host=host
    )
    response = api.get(reverse("api:run-evidence", args=[queued.pk]))
    assert response.status_code == 200
    assert 'run1.zip"' in response["Content-Disposition"]
    server = statement.load_public_key(EvidenceKey.objects.get().public_pem)
    report = verify_bundle(response.content, public_key=server)
    assert report.ok, report.problems
    assert any("before any decision" in note for note in report.notes)
    assert api.get(reverse("api:run-evidence", args=[queued.pk])).content == response.content
