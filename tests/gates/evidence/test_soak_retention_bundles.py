"""Retention end to end: a compressed soak against simhost (real sshd, agent and collector) is
decided, its evidence sealed, then the janitor prunes the raw files of the windows that tell
nothing. The bundle downloaded before stays verifiable; the one built after says, signed, which
windows' raw files were dropped, verifies offline, and still catches an edited kept window."""

from __future__ import annotations

import json

import pytest

from gates import services
from gates.evidence import bundle_for_decision, keys, layout, statement
from gates.evidence import publication as publishing
from gates.evidence.published import redacted_bundle, redaction_terms
from gates.evidence.retention import RETENTION
from gates.models import Artifact, EvidenceKey, Soak
from gates.tenancy import viewer_for_user
from runners.soak import collector
from runners.soak.retention import ranges_seqs, raw_file_dropped
from tests.gates.evidence.helpers import resealed
from tests.gates.evidence.test_soak_bundles import PREFIX, doubled_throughput, verification
from tests.gates.evidence.test_verifier_cli import isolated
from tests.runners.conftest import own_sshd  # noqa: F401 (fixture)
from tests.runners.soak.test_soak import (  # noqa: F401 (tasks_run_here: an autouse fixture)
    LOOSE_DRIFT,
    begin,
    g4_spec,
    soak_host,
    tasks_run_here,
    tick_until_ended,
)
from worker import tasks

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
POLICY = {"keep_every_nth_window": 4, "keep_after_sealed_days": 0}


def raw_names(run) -> set[str]:
    return set(Artifact.objects.filter(run=run).values_list("name", flat=True))


def resigned_retention(members: dict) -> None:
    """A dishonest server's edit goes with a retention record signed again over its envelope."""
    record = json.loads(statement.envelope_payload(json.loads(members[RETENTION]))[0])
    record["subject"][0]["digest"]["sha256"] = layout.sha256_hex(members[layout.ENVELOPE])
    payload = statement.payload_bytes(record)
    key = EvidenceKey.objects.get()
    signed = [(key.fingerprint, keys.key_sign(key, payload))]
    members[RETENTION] = statement.envelope_bytes(statement.envelope(payload, signed))


def test_a_sealed_soak_is_pruned_once_and_its_bundle_still_verifies_offline(
    customer_owner,
    actor,
    vendor_viewer,
    engagement,
    customer_org,
    own_sshd,  # noqa: F811
    tmp_path,
):
    host = soak_host(customer_org, own_sshd, tmp_path)
    document = {**g4_spec(seconds=12, **LOOSE_DRIFT), "retention": POLICY}
    run = tick_until_ended(begin(actor, vendor_viewer, engagement, host, document))
    decision = run.decisions.get()
    assert services.soaks_to_prune() == [], "until the evidence is sealed every file is kept"
    before = raw_names(run)
    sealed, _ = bundle_for_decision(decision)  # the first download seals it
    assert services.soaks_to_prune() == [run.pk]

    result = services.soak_prune(run_id=run.pk, budget_s=60, chunk=2)
    soak = Soak.objects.get(run=run)
    dropped = ranges_seqs(soak.retention["dropped"])
    assert result is not None and result.done and dropped
    gone = before - raw_names(run)
    assert gone == {name for name in before if raw_file_dropped(name, dropped)}
    assert gone and not any(name.endswith(collector.LINE_FILE) for name in gone)
    assert (result.files, soak.pruned_files) == (len(gone), len(gone))
    assert soak.pruned_bytes > 0 and soak.pruned_at is not None
    assert run.soak_samples.count() == soak.retention["windows"], "the summaries stay"
    assert services.soak_prune(run_id=run.pk, budget_s=60) is None, "pruned once"
    tasks.prune_soaks()  # the janitor's task finds nothing more to do
    assert raw_names(run) == before - gone

    after, _ = bundle_for_decision(decision)
    old, new = layout.read_zip(sealed), layout.read_zip(after)
    assert new[layout.ENVELOPE] == old[layout.ENVELOPE], "the sealed statement is unchanged"
    assert set(old) - set(new) == {PREFIX + "files/" + name for name in gone}
    assert all(new[name] == data for name, data in old.items() if name in new)
    assert bundle_for_decision(decision)[0] == after, "the same bytes on every download"

    report = verification(after)
    assert report.ok, report.problems
    note = f"raw files of {len(dropped)} windows dropped by retention (policy "
    assert any(note in line and "taken as recorded" in line for line in report.notes)
    assert verification(sealed).ok, "a copy downloaded before pruning still verifies"

    # An edited kept window, re-signed (statement and retention record) by the server's key.
    kept = sorted(set(range(soak.retention["windows"])) - dropped)
    middle = kept[len(kept) // 2]
    tampered = verification(
        resealed(after, lambda m: (doubled_throughput(m, middle), resigned_retention(m)))
    )
    assert any(f"(window {middle}).metrics.output_throughput" in p for p in tampered.problems)
    # Under another statement the record names other evidence: nothing counts as dropped.
    moved = verification(resealed(after, lambda m: None)).problems
    assert f"member {RETENTION}: not a retention record of this evidence" in moved
    assert any(f"(window {min(dropped)}).metrics" in problem for problem in moved)

    bundle, key = tmp_path / "pruned.zip", tmp_path / "server.pub"
    bundle.write_bytes(after)
    key.write_text(EvidenceKey.objects.get().public_key)
    cli = isolated(str(bundle), "--public-key", str(key))
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert note in cli.stdout and cli.stdout.strip().endswith("VERIFIED")

    # The library's redacted copy, signed anew, carries the retention record over its envelope.
    proposal = publishing.publication_propose(actor=actor, viewer=vendor_viewer, decision=decision)
    approved = publishing.publication_approve(
        actor=services.Actor(user=customer_owner, label="test"),
        viewer=viewer_for_user(customer_owner),
        publication=proposal,
        naming="industry",
        industry_label="a cloud provider",
    )
    redacted = verification(redacted_bundle(approved, redaction_terms(approved)))
    assert redacted.ok, redacted.problems
    assert any(note in line for line in redacted.notes)
