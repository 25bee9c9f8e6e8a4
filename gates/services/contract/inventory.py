"""The accepted host inventory as a contract both parties change together: the vendor proposes
an amendment from a run whose re-probe saw the changed host, both parties sign its digest, and
only then do later G2-G4 runs hold the host to the amended inventory.

Signed the way spec versions are: append-only rows bound to the digest, an optional SSHSIG.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from gates.errors import NotAllowedError, ServiceError
from gates.models import (
    Decision,
    Engagement,
    InventoryAmendment,
    InventorySignature,
    Party,
    Run,
    Verdict,
)
from gates.selectors import gate_counted_decisions
from gates.services.alerts.outbox import alert_enqueue, alert_recipients
from gates.services.audit import Actor, audit_record
from gates.services.contract.signing_keys import ssh_signature_check
from gates.services.contract.specs import OTHER_PARTY, SupersededSpecError
from gates.services.runs.step_facts import run_g1_facts
from gates.specs import validation as specs
from gates.tenancy import Viewer
from runners.contract import (
    INVENTORY_CHECK,
    difference_text,
    inventory_differences,
    inventory_of,
)

MIN_REASON_CHARS = 20


def accepted_inventory(engagement: Engagement) -> dict | None:
    """The inventory later runs are held to: the newest amendment both parties signed, else
    the host G1's counted pass was measured on; None when G1 was waived, rehearsed only, or
    passed without probes (nothing accepted, nothing to compare)."""
    signed = inventory_amendment_in_force(engagement)
    if signed is not None:
        return signed.inventory
    return g1_inventory(engagement)


def g1_inventory(engagement: Engagement, *, as_of: datetime | None = None) -> dict | None:
    """The inventory G1's counted pass measured (the latest one decided by `as_of`, if given)."""
    g1 = engagement.gates.get(kind="G1")
    counted = gate_counted_decisions(g1).filter(verdict=Verdict.PASS)
    if as_of is not None:
        counted = counted.filter(created_at__lte=as_of)
    passed: Decision | None = counted.first()
    run = passed.runs.first() if passed else None
    if run is None:
        return None
    inventory = inventory_of(run_g1_facts(run))
    return inventory if any(value is not None for value in inventory.values()) else None


def inventory_amendment_in_force(engagement: Engagement) -> InventoryAmendment | None:
    amendments = engagement.inventory_amendments.prefetch_related("signatures")
    return next((a for a in amendments.order_by("-created_at", "-id") if a.in_force), None)


def inventory_amendments_signed_by(
    engagement: Engagement, moment: datetime
) -> list[InventoryAmendment]:
    """Every amendment both parties had signed by `moment`, oldest first: the last is the one
    that was in force then (what inventory_amendment_in_force answers for now)."""
    amendments = engagement.inventory_amendments.prefetch_related("signatures")
    return [a for a in amendments.order_by("created_at", "id") if _signed_by(a, moment)]


def _signed_by(amendment: InventoryAmendment, moment: datetime) -> bool:
    parties = {
        s.party
        for s in amendment.signatures.all()
        if s.digest == amendment.digest and s.signed_at <= moment
    }
    return parties == {Party.VENDOR, Party.CUSTOMER}


def inventory_amendment_pending(engagement: Engagement) -> InventoryAmendment | None:
    """The newest amendment when it still lacks a signature (an older unsigned one is moot)."""
    latest = engagement.inventory_amendments.prefetch_related("signatures").first()
    return latest if latest is not None and not latest.in_force else None


def amendment_digest(engagement: Engagement, inventory: dict) -> str:
    return specs.inventory_digest(engagement.pk, inventory)


def inventory_amendment_propose(
    *, actor: Actor, viewer: Viewer, run: Run, reason: str
) -> tuple[InventoryAmendment, bool]:
    """Propose the inventory `run`'s re-probe saw (its invalid decision names every changed
    field) as the engagement's accepted inventory; (amendment, created). Proposing what is
    already pending or in force answers that amendment and creates nothing."""
    if not viewer.is_vendor or not viewer.can("spec.edit"):
        raise NotAllowedError("only vendor staff may propose an amended inventory")
    reason = (reason or "").strip()
    if len(reason) < MIN_REASON_CHARS:
        raise ServiceError(
            f"say why the host changed, in at least {MIN_REASON_CHARS} characters", field="reason"
        )
    engagement = run.gate.engagement
    with transaction.atomic():
        Engagement.objects.select_for_update().get(pk=engagement.pk)
        current = accepted_inventory(engagement)
        if current is None:
            raise ServiceError(
                "no inventory was accepted at G1, so none can be amended", field="run"
            )
        inventory = {**current, **_observed_changes(run)}
        digest = amendment_digest(engagement, inventory)
        latest = engagement.inventory_amendments.first()
        if latest is not None and latest.digest == digest:
            return latest, False
        changes = inventory_differences(current, inventory)
        amendment = InventoryAmendment.objects.create(
            engagement=engagement,
            inventory=inventory,
            digest=digest,
            reason=reason,
            source_run=run,
            proposed_by=actor.user,
        )
        audit_record(
            actor=actor,
            action="inventory.propose",
            target=amendment,
            organization_id=engagement.organization_id,
            detail={"digest": digest, "run": run.pk, "reason": reason, "changes": changes},
        )
        _alert_proposal(actor, engagement, amendment, changes)
    return amendment, True


def _observed_changes(run: Run) -> dict:
    """Each field the run's contract check found changed, at the value it observed."""
    decision = run.decisions.filter(verdict=Verdict.INVALID).first()
    clauses = decision.clauses if decision else []
    changed = {
        clause["check"].removeprefix(INVENTORY_CHECK): clause["observed"]
        for clause in clauses
        if str(clause.get("check", "")).startswith(INVENTORY_CHECK)
    }
    if not changed:
        raise ServiceError(
            f"run {run.pk} found no difference from the accepted inventory: propose from a "
            "run whose host check ended it invalid",
            field="run",
        )
    return changed


def _alert_proposal(actor: Actor, engagement, amendment, changes: list[dict]) -> None:
    other = OTHER_PARTY[Party.VENDOR]
    words = "; ".join(difference_text(change) for change in changes) or "no field changes"
    who = actor.user.get_username() if actor.user else actor.label
    alert_enqueue(
        event="inventory_proposed",
        key=f"inventory_proposed:{amendment.pk}",
        engagement=engagement,
        recipients=alert_recipients(engagement, party=other),
        subject=f"[Tollgate] {engagement.title}: the vendor proposed an amended host "
        f"inventory: {words[:160]}",
        body=f"{who} (vendor) proposed an amended host inventory.\n\nWhy: {amendment.reason}\n\n"
        f"What changes:\n{words}\n\nLater G2-G4 runs are held to it only once both parties "
        f"sign its digest {amendment.digest}; until then they still see the host as changed.\n",
    )


def inventory_amendment_sign(
    *,
    actor: Actor,
    viewer: Viewer,
    amendment: InventoryAmendment,
    digest: str | None = None,
    ssh_signature: str = "",
) -> InventoryAmendment:
    """Sign the pending amendment for the viewer's party, bound to its digest."""
    party = viewer.signing_party
    if party is None:
        raise NotAllowedError("only a vendor admin or a customer owner may sign an inventory")
    with transaction.atomic():
        Engagement.objects.select_for_update().get(pk=amendment.engagement_id)
        latest = InventoryAmendment.objects.filter(engagement_id=amendment.engagement_id).first()
        _check_signable(amendment, latest, digest)
        if amendment.signatures.filter(party=party).exists():
            return amendment
        key = (
            ssh_signature_check(viewer, amendment.digest, ssh_signature) if ssh_signature else None
        )
        InventorySignature.objects.create(
            amendment=amendment,
            party=party,
            digest=amendment.digest,
            signed_by=actor.user,
            key=key,
            ssh_signature=ssh_signature.strip(),
        )
        amendment = InventoryAmendment.objects.get(pk=amendment.pk)
        audit_record(
            actor=actor,
            action="inventory.sign",
            target=amendment,
            organization_id=amendment.engagement.organization_id,
            detail={
                "party": party,
                "digest": amendment.digest,
                "key": key.fingerprint if key else None,
                "in_force": amendment.in_force,
            },
        )
    return amendment


def _check_signable(amendment, latest, digest: str | None) -> None:
    if latest is not None and latest.pk != amendment.pk:
        raise SupersededSpecError(
            "a newer inventory amendment was proposed since: sign the latest one",
            field="amendment",
        )
    if digest is not None and digest != amendment.digest:
        raise SupersededSpecError(
            f"the digest you signed is not this amendment's ({amendment.digest}): reload and "
            "check the inventory again",
            field="digest",
        )
