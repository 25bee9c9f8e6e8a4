"""What the gate page shows of the contract: who signed which version when, the version in
force, the proposal and its diff, and which signing buttons this viewer gets."""

from __future__ import annotations

from dataclasses import dataclass, field

from gates.decisions.clauses import parse_g3_spec
from gates.decisions.statistics.budget import reset_cost
from gates.models import Gate, GateSpec
from gates.selectors import gate_counted_decisions, gate_spec_in_force, gate_spec_proposed
from gates.services.contract.power import spec_power
from gates.specs.validation import parse_spec
from gates.specs.words import ChangeWords, field_name, spec_change_words, value_words
from gates.tenancy import Viewer


@dataclass(frozen=True)
class GateContract:
    latest: GateSpec
    in_force: GateSpec | None
    proposed: GateSpec | None
    changes: list[ChangeWords] = field(default_factory=list)
    signatures: list = field(default_factory=list)
    awaiting: list[str] = field(default_factory=list)
    # The party this viewer signs for, when the latest version still lacks its signature.
    can_sign_as: str | None = None
    counted_failures: int = 0
    pending_reset: object = None
    can_sign_reset: bool = False
    # The latest version field by field (name, dotted path, value), and how it differs from the
    # version before it, unless that is the proposal's own diff against the version in force.
    readable: list[tuple[str, str, str]] = field(default_factory=list)
    previous: GateSpec | None = None
    previous_changes: list[ChangeWords] = field(default_factory=list)
    # G3: the latest version's power at its claims when it requires power and this viewer may
    # still sign it (an underpowered one needs an acknowledgement), and what one more
    # stop-loss reset adds to the engagement's error before both sign it.
    power: dict | None = None
    reset_cost: dict | None = None


def gate_contract(gate: Gate, spec: GateSpec, viewer: Viewer) -> GateContract:
    signed = spec.signed_parties
    party = viewer.signing_party
    failures = gate_counted_decisions(gate).filter(verdict="fail").count()
    pending = gate.resets.filter(effective_at__isnull=True).first()
    reset_signed = pending is not None and getattr(pending, f"{party}_signed_at", None)
    proposed, in_force = gate_spec_proposed(gate), gate_spec_in_force(gate)
    previous = gate.specs.filter(version__lt=spec.version).order_by("-version").first()
    return GateContract(
        latest=spec,
        in_force=in_force,
        proposed=proposed,
        changes=_changes(in_force, proposed),
        signatures=list(spec.signatures.filter(digest=spec.digest).select_related("signed_by")),
        awaiting=[p for p in ("vendor", "customer") if p not in signed],
        can_sign_as=party if party and party not in signed else None,
        counted_failures=failures,
        pending_reset=pending,
        can_sign_reset=bool(party) and (failures > 0 or pending is not None) and not reset_signed,
        readable=spec_fields(spec.document),
        previous=previous,
        previous_changes=[]
        if _same_pair(previous, in_force, spec, proposed)
        else _changes(previous, spec),
        power=_power_to_sign(spec) if party and party not in signed else None,
        reset_cost=_reset_cost(gate, spec),
    )


def _changes(before: GateSpec | None, after: GateSpec | None) -> list[ChangeWords]:
    if before is None or after is None or before.pk == after.pk:
        return []
    return spec_change_words(before.document, after.document)


def _same_pair(previous, in_force, latest, proposed) -> bool:
    """The latest version is the proposal and the one before it is in force: one diff, shown
    once (under the proposal)."""
    return previous is not None and in_force == previous and proposed == latest


def _power_to_sign(spec: GateSpec) -> dict | None:
    if not (spec.document.get("statistics") or {}).get("require_power"):
        return None
    return spec_power(spec)


def _reset_cost(gate: Gate, spec: GateSpec) -> dict | None:
    """A G3 spec with an error budget: what the next reset adds, in percent per side."""
    if gate.kind != Gate.Kind.G3 or not spec.document.get("statistics"):
        return None
    parsed = parse_g3_spec(parse_spec(spec.document, "G3"))
    cost = reset_cost(parsed, gate.resets.filter(effective_at__isnull=False).count())
    return {
        "before_pct": 100 * cost["lifetime_before"],
        "after_pct": 100 * cost["lifetime_after"],
        "attempts_added": cost["attempts_added"],
    }


def spec_fields(document: dict) -> list[tuple[str, str, str]]:
    """Every leaf of the spec as (name, dotted path, value in its unit), named as changes are:
    ("GPUs on the host, exactly", "expect.gpu_count", "8 GPUs")."""
    return [
        (field_name(path, document), path, value_words(path, value))
        for path, value in _leaves("", document)
    ]


def _leaves(path: str, value):
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(f"{path}.{key}" if path else str(key), item)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            yield from _leaves(f"{path}[{index}]", item)
    else:
        yield path or "(document)", value
