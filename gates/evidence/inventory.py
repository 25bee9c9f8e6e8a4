"""The host inventory a decision's run was held to, as two bundle members: the inventory G1
accepted and every amendment both parties had signed by then, with those signatures. Read as
of the run's start (a run keeps the inventory it started with; never later than the decision),
not the sealing: a seal made later must not show an amendment signed after the verdict, or
while the run was under way, as its basis. Django side; the verifier's checks of the same
records are gates/evidence/agreements.py.
"""

from __future__ import annotations

from datetime import datetime

from gates.models import Decision, InventoryAmendment, InventorySignature, SpecSignature
from gates.services.contract.inventory import g1_inventory, inventory_amendments_signed_by
from gates.services.runs.step_facts import run_g1_facts
from runners.contract import inventory_of


def g1_record(decision: Decision) -> dict | None:
    """`inventory/g1.json`: what G1 accepted by the decision's time (a G1 decision: its own)."""
    if decision.gate.kind == "G1":
        run = decision.runs.first()
        return inventory_of(run_g1_facts(run)) if run else None
    return g1_inventory(decision.gate.engagement, as_of=held_as_of(decision))


def amendments_record(decision: Decision) -> dict:
    """`inventory/amendments.json`: the amendments both parties had signed by `as_of`, oldest
    first; `in_force` names the newest, the inventory the run was held to (None: g1.json).
    A G1 run is held to no inventory (it measures one), so a G1 decision lists none."""
    as_of = held_as_of(decision)
    engagement = decision.gate.engagement
    signed = [] if decision.gate.kind == "G1" else inventory_amendments_signed_by(engagement, as_of)
    return {
        "engagement": engagement.pk,
        "as_of": as_of.isoformat(),
        "amendments": [_amendment(amendment, as_of) for amendment in signed],
        "in_force": signed[-1].digest if signed else None,
    }


def held_as_of(decision: Decision) -> datetime:
    """When the decision's run compared the host with the inventory in force: its start (the
    plan that carries the inventory is made when the run is claimed), else the decision's time."""
    starts = [s for s in decision.runs.values_list("started_at", flat=True) if s is not None]
    return min([*starts, decision.created_at])


def signature_record(row: SpecSignature | InventorySignature) -> dict:
    """One party's signature over a digest, with the SSHSIG where they signed with their key,
    and, where they signed a G3 spec acknowledging it underpowered, the power they were shown."""
    record = {
        "party": row.party,
        "digest": row.digest,
        "signed_by": row.signed_by.get_username() if row.signed_by else None,
        "signed_at": row.signed_at.isoformat(),
        "key_fingerprint": row.key.fingerprint if row.key else None,
        "ssh_signature": row.ssh_signature,
    }
    acknowledged = getattr(row, "acknowledged_power", None)
    if acknowledged is not None:  # absent otherwise: bundles sealed before it stay byte-identical
        record["acknowledged_power"] = acknowledged
    return record


def _amendment(amendment: InventoryAmendment, as_of: datetime) -> dict:
    source = amendment.source_run
    rows = amendment.signatures.filter(signed_at__lte=as_of).select_related("signed_by", "key")
    return {
        "digest": amendment.digest,
        "inventory": amendment.inventory,
        "reason": amendment.reason,
        "source_run": None
        if source is None
        else {"id": source.pk, "gate": source.gate.kind, "attempt": source.attempt},
        "proposed_by": amendment.proposed_by.get_username() if amendment.proposed_by else None,
        "proposed_at": amendment.created_at.isoformat(),
        # The registered key's public half beside its SSHSIG, so the verifier needs no server.
        "signatures": [
            {**signature_record(row), "public_key": row.key.public_key if row.key else None}
            for row in rows.order_by("party")
        ],
    }
