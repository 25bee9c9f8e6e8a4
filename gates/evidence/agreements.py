"""What the parties agreed, checked in a bundle: each party's signature over the spec's digest,
the inventory amendments in force at the decision (each digest against its canonical content,
both parties' signatures over it, and every SSHSIG against the key the row lists), and that a
run the host check ended invalid was compared with the inventory the bundle says it was held to,
its changes read again from the probe outputs the check kept.

Pure: members in, problems and notes out; no Django, no network (the offline verifier).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from gates import sshsig
from gates.evidence import layout
from gates.evidence.layout import load_json_member
from gates.evidence.recompute import RunRecords, file_facts
from gates.specs.validation import inventory_digest
from runners.contract import INVENTORY_CHECK, first_reported, inventory_differences, inventory_of

PARTIES = ("vendor", "customer")


class Report(Protocol):
    problems: list[str]
    notes: list[str]


def check_spec_signatures(rows: object, digest: str | None, report: Report) -> None:
    for row in rows if isinstance(rows, list) else []:
        who = f"spec signature of the {row.get('party')}"
        if digest is None or row.get("digest") != digest:
            report.problems.append(f"{who}: signed digest {row.get('digest')}, not the spec's")
        else:
            check_ssh_signature(who, row, digest, report)
            _note_acknowledged_power(who, row.get("acknowledged_power"), report)


def _note_acknowledged_power(who: str, acknowledged: object, report: Report) -> None:
    """An underpowered spec signed knowingly: the verdict's reader must see it."""
    if not isinstance(acknowledged, dict):
        return
    power, wanted = acknowledged.get("power"), acknowledged.get("min_power")
    if isinstance(power, (int, float)) and isinstance(wanted, (int, float)):
        report.notes.append(
            f"{who}: signed acknowledging the spec is underpowered (the gate passes {power:.0%} "
            f"at its claims at {acknowledged.get('noise')}, under the {wanted:.0%} it wants)"
        )


def check_ssh_signature(who: str, row: dict, digest: str, report: Report) -> None:
    """A party's own `ssh-keygen -Y sign -n tollgate-spec` over `digest`, when they gave one:
    it must verify and be made with the key the row names (and, where listed, carries)."""
    if not row.get("ssh_signature"):
        return  # signed through Tollgate's account only: the server's word, as signed above
    try:
        blob = sshsig.verify(row["ssh_signature"], digest.encode())
    except sshsig.SshSigError as error:
        report.problems.append(f"{who}: {error}")
        return
    made_by = sshsig.fingerprint(blob)
    listed = row.get("key_fingerprint")
    if listed is not None and listed != made_by:
        report.problems.append(f"{who}: SSH signature made with key {made_by}, not {listed}")
        return
    if "public_key" in row and _blob(row["public_key"]) != blob:
        report.problems.append(f"{who}: SSH signature made with key {made_by}, not the listed one")
        return
    report.notes.append(f"{who}: SSH signature by {made_by} verifies")


def check_inventory_amendments(
    members: dict[str, bytes], decided_at: object, report: Report
) -> None:
    """The amendments the decision's runs were held to; a bundle sealed before they were
    carried has no such member and says so."""
    name = layout.INVENTORY_AMENDMENTS
    if name not in members:
        report.notes.append(
            f"member {name}: absent (sealed before bundles carried inventory amendments); "
            f"{layout.INVENTORY} is the inventory accepted when it was sealed"
        )
        return
    record = load_json_member(members, name)
    amendments = record.get("amendments")
    if not isinstance(amendments, list):
        report.problems.append(f"member {name}: amendments must be a list")
        return
    if not _before(record.get("as_of"), decided_at):
        report.problems.append(
            f"member {name}: as_of {record.get('as_of')!r} is not before the decision "
            f"({decided_at!r})"
        )
    for position, amendment in enumerate(amendments, start=1):
        _check_amendment(amendment, position, record, report)
    _check_in_force(record, amendments, report)


def _check_amendment(amendment: dict, position: int, record: dict, report: Report) -> None:
    digest = str(amendment.get("digest"))
    who = f"inventory amendment {position} ({digest[:12]})"
    before = len(report.problems)
    engagement, inventory = record.get("engagement"), amendment.get("inventory")
    recomputed = None  # of a malformed amendment: no digest, so a mismatch
    if isinstance(engagement, int) and isinstance(inventory, dict):
        recomputed = inventory_digest(engagement, inventory)
    if recomputed != digest:
        report.problems.append(
            f"{who}: digest {digest} is not the SHA-256 of its canonical engagement and inventory"
        )
    rows = [row for row in amendment.get("signatures") or [] if isinstance(row, dict)]
    for party in PARTIES:
        _check_party(
            who, party, [r for r in rows if r.get("party") == party], digest, record, report
        )
    if len(report.problems) == before:
        report.notes.append(f"{who}: its digest and both parties' signatures over it verify")


def _check_party(
    who: str, party: str, rows: list[dict], digest: str, record: dict, report: Report
) -> None:
    signer = f"{who}: the {party}'s signature"
    if not rows:
        report.problems.append(f"{who}: not signed by the {party}")
        return
    for row in rows:
        if row.get("digest") != digest:
            report.problems.append(f"{signer} is over digest {row.get('digest')}, not its own")
            continue
        if not _before(row.get("signed_at"), record.get("as_of")):
            report.problems.append(
                f"{signer} was given at {row.get('signed_at')}, after the run was held to it "
                f"({record.get('as_of')})"
            )
        check_ssh_signature(signer, row, digest, report)


def _check_in_force(record: dict, amendments: list, report: Report) -> None:
    name = layout.INVENTORY_AMENDMENTS
    newest = amendments[-1].get("digest") if amendments else None
    if record.get("in_force") != newest:
        report.problems.append(
            f"member {name}: in_force {record.get('in_force')!r} is not the newest amendment "
            f"signed by the decision ({newest!r})"
        )
    elif newest is None:
        report.notes.append(
            f"inventory: no amendment in force when the run started; held to {layout.INVENTORY}"
        )
    else:
        report.notes.append(
            f"inventory: the run was held to amendment {newest[:12]}, in force when it started"
        )


def _before(signed_at: object, as_of: object) -> bool:
    try:
        return datetime.fromisoformat(str(signed_at)) <= datetime.fromisoformat(str(as_of))
    except (TypeError, ValueError):
        return False  # a time that is not ISO 8601 proves nothing about the order


def check_contract_decision(
    members: dict[str, bytes], decision: dict, runs: list[RunRecords], report: Report
) -> None:
    """A run the host check ended `invalid` before any server started: each clause's accepted
    value must be the inventory the run was held to (the amendment then in force, else G1's),
    and its observed value what the check's kept probe outputs say, read again with the same
    adapters; the changed fields found again must be exactly the decision's."""
    if layout.INVENTORY_AMENDMENTS not in members:
        report.notes.append(
            "a host-check decision sealed before bundles carried inventory amendments: its "
            "accepted values are as recorded"
        )
        return
    held = held_inventory(members) or {}
    clauses = decision.get("clauses") or []
    for position, clause in enumerate(clauses):
        where = f"{layout.DECISION} clauses[{position}] ({clause.get('check')})"
        field = str(clause.get("check", "")).removeprefix(INVENTORY_CHECK)
        expected = held.get(field)
        if clause.get("expected") != expected:
            report.problems.append(
                f"{where}: accepted {clause.get('expected')!r}, but the inventory the run was "
                f"held to has {expected!r}"
            )
    if decision.get("verdict") != "invalid":
        report.problems.append(f"{layout.DECISION}: a host-check decision must be invalid")
    for run in runs:
        _check_observed(run, held, clauses, report)


def _check_observed(run: RunRecords, held: dict, clauses: list[dict], report: Report) -> None:
    probes = _contract_probes(run)
    if not any(f"probes/{name}.txt" in run.files for name in probes):
        report.notes.append(
            f"a host-check decision whose probe outputs were not kept ({run.prefix}: sealed "
            "before the check kept them, or recorded without one): each changed field's "
            "accepted value compared with the inventory the run was held to; observed values "
            "as recorded"
        )
        return
    kept = [f"probes/{name}.txt" for name in probes if f"probes/{name}.txt" in run.files]
    facts = first_reported(file_facts(name, run.files[name]) for name in kept)
    again = inventory_differences(held, inventory_of(facts))
    recorded = [
        (str(c.get("check", "")).removeprefix(INVENTORY_CHECK), c.get("observed")) for c in clauses
    ]
    recomputed = [(d["field"], d["observed"]) for d in again]
    if recorded != recomputed:
        report.problems.append(
            f"{layout.DECISION} clauses: the host check's kept probe outputs "
            f"({run.prefix}files/probes/) give the changes {_changes(recomputed)}, the decision "
            f"says {_changes(recorded)}"
        )
        return
    report.notes.append(
        "a host-check decision: each changed field read again from the probe outputs the check "
        f"kept ({run.prefix}files/probes/) and compared with the inventory the run was held to: "
        f"{len(again)} changed, as recorded"
    )


def _contract_probes(run: RunRecords) -> list[str]:
    """The host check's probes, in the order it ran them (its step in steps.json)."""
    for detail in run.steps if isinstance(run.steps, list) else []:
        step = (detail.get("step") if isinstance(detail, dict) else None) or {}
        if step.get("kind") == "contract":
            return [str(name) for name in step.get("probes") or []]
    return []


def _changes(pairs: list[tuple[str, object]]) -> str:
    return ", ".join(f"{field}={observed!r}" for field, observed in pairs) or "none"


def held_inventory(members: dict[str, bytes]) -> dict | None:
    """The inventory the run was held to: the amendment in force then, else G1's."""
    record = load_json_member(members, layout.INVENTORY_AMENDMENTS)
    for amendment in record.get("amendments") or []:
        if amendment.get("digest") == record.get("in_force"):
            return amendment.get("inventory")
    return load_json_member(members, layout.INVENTORY)


def _blob(line: object) -> bytes | None:
    try:
        return sshsig.public_key_blob(str(line))
    except sshsig.SshSigError:
        return None
