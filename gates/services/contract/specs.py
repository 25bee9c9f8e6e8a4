"""The agreed bar: spec versions proposed and signed, and stop-loss resets both parties sign.

A version is in force once a vendor admin and a customer owner have signed its digest; a new
version after a counted attempt is a proposal the other party is alerted to, with the diff.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from gates.errors import IllegalTransitionError, NotAllowedError, ServiceError, SpecInvalidError
from gates.models import Gate, GateSpec, Party, SpecSignature, StopLossReset, Verdict
from gates.selectors import gate_counted_decisions, gate_spec_in_force
from gates.services.alerts.outbox import alert_enqueue, alert_recipients
from gates.services.audit import Actor, audit_record
from gates.services.contract.power import spec_power_check_signing
from gates.services.contract.signing_keys import ssh_signature_check
from gates.services.runs.lifecycle import decision_record
from gates.services.runs.readouts import gate_readout_refresh
from gates.services.traces import spec_trace_check
from gates.specs import validation as specs
from gates.specs.diff import spec_changes
from gates.specs.words import changes_lines, spec_change_words
from gates.tenancy import Viewer
from runners.contract import CONTRACT_CHECK_ENGINE, INVENTORY_CHECK

MIN_RESET_REASON_CHARS = 20
OTHER_PARTY = {Party.VENDOR: Party.CUSTOMER, Party.CUSTOMER: Party.VENDOR}


class StaleSpecError(ServiceError):
    """If-Match named a digest that is no longer the latest version's."""

    code = "stale_spec"
    status = 412


class SupersededSpecError(ServiceError):
    code = "spec_superseded"
    status = 409


@dataclass(frozen=True)
class SpecChange:
    spec: GateSpec
    created: bool


def gate_spec_update(*, actor: Actor, gate: Gate, document: object) -> GateSpec:
    return gate_spec_propose(actor=actor, gate=gate, document=document).spec


def gate_spec_propose(
    *, actor: Actor, gate: Gate, document: object, if_match: str | None = None
) -> SpecChange:
    """Store `document` as the next version, unless it is (canonically) the latest already.

    `if_match` is the digest the editor started from: a stale one is refused, so two people
    editing at once never overwrite each other silently.
    """
    if gate.state == Gate.State.WAIVED or gate.verdict == Verdict.PASS:
        raise IllegalTransitionError(f"{gate.kind} is closed; its spec can no longer change")
    with transaction.atomic():
        gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
        latest = gate.specs.order_by("-version").first()
        if if_match is not None and (latest is None or if_match.strip('"') != latest.digest):
            raise StaleSpecError(
                "the spec changed since you read it: read the latest version and edit that",
                field="If-Match",
            )
        if latest is not None and _same_document(document, latest):
            return SpecChange(latest, created=False)
        version = (latest.version if latest else 0) + 1
        if isinstance(document, dict):
            document = specs.with_version(document, version)
        errors = specs.validate_spec(gate.kind, document)
        if errors or not isinstance(document, dict):  # validate_spec refuses a non-object
            raise SpecInvalidError(errors)
        spec_trace_check(gate.engagement, document)
        spec = GateSpec.objects.create(
            gate=gate,
            version=version,
            document=document,
            digest=specs.spec_digest(document),
            created_by=actor.user,
        )
        gate_readout_refresh(gate.pk)
        in_force = gate_spec_in_force(gate)
        changes = spec_changes(in_force.document, document) if in_force else []
        audit_record(
            actor=actor,
            action="spec.update",
            target=spec,
            organization_id=gate.engagement.organization_id,
            detail={
                "gate": gate.kind,
                "version": version,
                "digest": spec.digest,
                "changes": [str(change) for change in changes][:50],
            },
        )
        if in_force is not None or gate_counted_decisions(gate).exists():
            words = spec_change_words(in_force.document, document) if in_force else []
            _alert_proposal(actor, gate, spec, in_force, words)
    return SpecChange(spec, created=True)


def _same_document(document: object, latest: GateSpec) -> bool:
    if not isinstance(document, dict):
        return False
    return specs.spec_digest(specs.with_version(document, latest.version)) == latest.digest


def _alert_proposal(actor, gate, spec, in_force, words) -> None:
    party = _actor_party(actor)
    other = OTHER_PARTY[party]
    who = actor.user.get_username() if actor.user else actor.label
    against = f"v{in_force.version} in force" if in_force else "no version in force yet"
    alert_enqueue(
        event="spec_proposed",
        key=f"spec_proposed:{spec.pk}",
        engagement=gate.engagement,
        gate=gate,
        recipients=alert_recipients(gate.engagement, party=other),
        subject=f"[Tollgate] {gate.engagement.title}: the {party} proposed a new {gate.kind} "
        f"spec: " + "; ".join(str(change) for change in words[:2]),
        body=f"{who} ({party}) proposed {gate.kind} spec v{spec.version} ({against}).\n\n"
        f"What changes:\n{changes_lines(words)}\n\n"
        f"v{spec.version} is not in force until both parties sign its digest {spec.digest}.\n",
    )


def _actor_party(actor: Actor) -> str:
    user = actor.user
    if user is not None and user.memberships.filter(organization__kind="customer").exists():
        return Party.CUSTOMER
    return Party.VENDOR


def gate_spec_sign(
    *,
    actor: Actor,
    viewer: Viewer,
    spec: GateSpec,
    digest: str | None = None,
    ssh_signature: str = "",
    acknowledge_underpowered: bool = False,
) -> GateSpec:
    """Sign the latest version for the viewer's party, bound to its digest; it is frozen. An
    underpowered G3 spec is signed only with `acknowledge_underpowered` (contract.power)."""
    party = viewer.signing_party
    if party is None:
        raise NotAllowedError("only a vendor admin or a customer owner may sign a spec")
    with transaction.atomic():
        # The gate first, then the spec: the order every writer of a gate's specs locks in.
        Gate.objects.select_for_update().filter(pk=spec.gate_id).values_list("pk").get()
        spec = (
            GateSpec.objects.select_for_update().select_related("gate__engagement").get(pk=spec.pk)
        )
        _check_signable(spec, digest)
        existing = spec.signature(party)
        if existing is not None:
            return spec
        acknowledged = spec_power_check_signing(spec, acknowledge=acknowledge_underpowered)
        key = ssh_signature_check(viewer, spec.digest, ssh_signature) if ssh_signature else None
        now = timezone.now()
        SpecSignature.objects.create(
            spec=spec,
            party=party,
            digest=spec.digest,
            signed_by=actor.user,
            signed_at=now,
            key=key,
            ssh_signature=ssh_signature.strip(),
            acknowledged_power=acknowledged,
        )
        spec.frozen_at = spec.frozen_at or now
        spec.save(update_fields=["frozen_at"])
        gate_readout_refresh(spec.gate_id)
        audit_record(
            actor=actor,
            action="spec.sign",
            target=spec,
            organization_id=spec.gate.engagement.organization_id,
            detail={
                "party": party,
                "version": spec.version,
                "digest": spec.digest,
                "key": key.fingerprint if key else None,
                "in_force": spec.in_force,
                "acknowledged_power": acknowledged and acknowledged["power"],
            },
        )
    return spec


def _check_signable(spec: GateSpec, digest: str | None) -> None:
    if spec.digest != specs.spec_digest(spec.document):
        raise ServiceError("the stored spec does not match its digest", field="document")
    latest = spec.gate.specs.order_by("-version").values_list("version", flat=True).first()
    if latest != spec.version:
        raise SupersededSpecError(
            f"v{spec.version} is superseded by v{latest}: sign the latest version",
            field="version",
        )
    if digest is not None and digest != spec.digest:
        raise SupersededSpecError(
            f"the digest you signed is not v{spec.version}'s ({spec.digest}): reload and "
            "check the document again",
            field="digest",
        )


def stop_loss_reset_sign(*, actor: Actor, viewer: Viewer, gate: Gate, reason: str) -> StopLossReset:
    """Sign the gate's pending reset (opening one with `reason` if none is pending). When both
    parties have signed, earlier counted failures stop counting toward stop-loss."""
    party = viewer.signing_party
    if party is None:
        raise NotAllowedError("only a vendor admin or a customer owner may sign a reset")
    with transaction.atomic():
        gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
        reset = gate.resets.select_for_update().filter(effective_at__isnull=True).first()
        if reset is None:
            reset = _reset_open(actor, gate, reason)
        if getattr(reset, f"{party}_signed_at") is None:
            setattr(reset, f"{party}_signed_by", actor.user)
            setattr(reset, f"{party}_signed_at", timezone.now())
        if reset.vendor_signed_at and reset.customer_signed_at:
            reset.effective_at = timezone.now()
            gate.stop_loss_review = False
            gate.save(update_fields=["stop_loss_review"])
        reset.save()
        audit_record(
            actor=actor,
            action="gate.reset.sign",
            target=gate,
            organization_id=gate.engagement.organization_id,
            detail={"party": party, "reason": reset.reason, "effective": bool(reset.effective_at)},
        )
    return reset


def _reset_open(actor: Actor, gate: Gate, reason: str) -> StopLossReset:
    if len((reason or "").strip()) < MIN_RESET_REASON_CHARS:
        raise ServiceError(
            f"write a reason of at least {MIN_RESET_REASON_CHARS} characters", field="reason"
        )
    return StopLossReset.objects.create(gate=gate, reason=reason.strip(), created_by=actor.user)


def run_invalid(*, run_id: int, reason: str, differences: list[dict]):
    """The host changed since G1 accepted it: the run ends `invalid`, each difference named."""
    clauses = [
        {
            "check": f"{INVENTORY_CHECK}{d['field']}",
            "expected": d["accepted"],
            "observed": d["observed"],
            "verdict": Verdict.INVALID,
            "cause": f"{d['accepted']!r} accepted at G1, {d['observed']!r} now",
        }
        for d in differences
    ]
    result = {
        "verdict": Verdict.INVALID,
        "clauses": clauses,
        "reasons": [reason],
        "engine": CONTRACT_CHECK_ENGINE,
    }
    return decision_record(run_id=run_id, result=result)
