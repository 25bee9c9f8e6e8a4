"""Bundles of gates decided end to end against simhost (real sshd, real simhost, the real task
code): G1, G2 and G3 each recompute from their raw files to the recorded verdict and numbers,
and a G3 run on a host whose changed driver both parties accepted carries that amendment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates import services
from gates.evidence import bundle_for_decision, layout, statement
from gates.evidence.verify import verify_bundle
from gates.models import EvidenceKey, Host
from tests.gates.evidence.helpers import edited_json, resealed
from tests.gates.evidence.test_bundles import problems_of
from tests.gates.services.test_inventory_amendment import as_user, propose, updated_driver  # noqa: F401
from tests.gates.test_sshsig import keygen, needs_ssh_keygen, ssh_sign
from tests.runners.conftest import own_sshd  # noqa: F401 (fixture)
from tests.runners.program.test_gate_programs import drive, start, tasks_run_here  # noqa: F401
from tests.simhosts import g1_spec, g2_spec, g3_spec, ssh_simhost

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture
def sim_host(customer_org, own_sshd, tmp_path) -> Host:  # noqa: F811
    return ssh_simhost(customer_org, own_sshd, tmp_path / "host")


def verified(decision) -> tuple[dict[str, bytes], list[str]]:
    data, _ = bundle_for_decision(decision)
    key = statement.load_public_key(EvidenceKey.objects.get().public_pem)
    report = verify_bundle(data, public_key=key)
    assert report.ok, report.problems
    return layout.read_zip(data), report.notes


def test_g1_g2_and_g3_decided_on_simhost_recompute_from_their_raw_files(
    actor, vendor_viewer, engagement, sim_host
):
    specs = {"G1": g1_spec(), "G2": g2_spec(), "G3": g3_spec()}
    for kind, document in specs.items():
        run = drive(start(actor, vendor_viewer, engagement, kind, sim_host, document))
        decision = run.gate.decisions.first()
        assert decision.verdict == "pass", (kind, decision.result.get("reasons"), run.log[-2000:])
        members, notes = verified(decision)
        assert any("recomputed from its raw files to pass" in note for note in notes), notes
        files = [n for n in members if n.startswith("runs/attempt-1/files/")]
        assert files, kind
    g3 = engagement.gates.get(kind="G3").decisions.first()
    members, _ = verified(g3)
    inventory = layout.load_json_member(members, layout.INVENTORY)
    assert inventory["gpu_count"], "the G1 inventory G3 ran under"
    tools = layout.load_json_member(members, layout.VERSIONS)["host_tools"]["attempt-1"]
    assert tools["vllm_version"], tools
    assert layout.OPERATING_CHARACTERISTIC in members


@needs_ssh_keygen
def test_a_g3_run_held_to_a_signed_amendment_carries_it_and_verifies(
    vendor_engineer,
    vendor_admin,
    customer_owner,
    updated_driver,  # noqa: F811 (fixture)
    tmp_path,
):
    invalid_run, run_g3 = updated_driver
    amendment, _ = propose(vendor_engineer, invalid_run)
    key = keygen(tmp_path)
    public_key = Path(f"{key}.pub").read_text()
    registered = services.party_key_register(public_key=public_key, **as_user(customer_owner))
    for user, signature in (
        (vendor_admin, ""),
        (customer_owner, ssh_sign(key, amendment.digest, tmp_path)),
    ):
        services.inventory_amendment_sign(
            amendment=amendment, digest=amendment.digest, ssh_signature=signature, **as_user(user)
        )
    accepted = run_g3()
    assert accepted.decisions.get().verdict != "invalid", accepted.log[-2000:]

    members, notes = verified(accepted.decisions.get())
    record = json.loads(members[layout.INVENTORY_AMENDMENTS])
    assert record["in_force"] == amendment.digest
    [carried] = record["amendments"]
    assert carried["inventory"]["driver_version"] == "550.90.07"
    assert carried["source_run"] == {
        "id": invalid_run.pk,
        "gate": "G3",
        "attempt": invalid_run.attempt,
    }
    customer = next(row for row in carried["signatures"] if row["party"] == "customer")
    assert customer["key_fingerprint"] == registered.fingerprint
    held = f"inventory: the run was held to amendment {amendment.digest[:12]}, in force when it"
    assert any(note.startswith(held) for note in notes), notes
    assert json.loads(members[layout.INVENTORY])["driver_version"] == "550.54.15"

    # The run that found the change was decided before anyone signed: sealed now, its bundle
    # still shows it held to G1's inventory, and its host check compared with that.
    members, notes = verified(invalid_run.decisions.get())
    assert json.loads(members[layout.INVENTORY_AMENDMENTS])["amendments"] == []
    read_again = "a host-check decision: each changed field read again from the probe outputs"
    assert any(note.startswith(read_again) and "1 changed" in note for note in notes), notes
    kept = f"{layout.run_prefix(invalid_run.attempt)}files/probes/gpu_nvidia.txt"
    assert b"550.90.07" in members[kept]  # the output the changed driver was read from

    # A server that edits what the check observed and signs again is named by the recompute.
    data, _ = bundle_for_decision(invalid_run.decisions.get())

    def observed_elsewhere(members):
        edited_json(members, layout.DECISION, lambda d: d["clauses"][0].update(observed="555.1"))

    problems = problems_of(resealed(data, observed_elsewhere))
    assert (
        "decision/decision.json clauses: the host check's kept probe outputs "
        f"({layout.run_prefix(invalid_run.attempt)}files/probes/) give the changes "
        "driver_version='550.90.07', the decision says driver_version='555.1'"
    ) in problems, problems
