"""Power before signing (docs/decisions.md): a G3 spec that requires power (the template does)
and whose gate, at the engagement's noise (the G2 A/A noise, else the spec's stated CV with its
source), passes less often than its `statistics.min_power` with every clause at its claimed
effect cannot be signed unless the signer acknowledges it. The refusal says what would make it
decisive (more repetitions, more prompts per bench) and what that costs; an acknowledgement
stores that power beside the signature, and is shown on the gate page, in the stop-loss review
and in the evidence. A run starts only when the spec reaches its power at today's noise or both
parties acknowledged it.
"""

from __future__ import annotations

from typing import Any

from gates.decisions.statistics.signing import proposals_for
from gates.decisions.statistics.spread import cv_from_sd
from gates.errors import ServiceError
from gates.models import Gate, GateSpec
from gates.selectors import gate_hours_per_repetition, spec_operating_characteristic
from gates.specs.validation import parse_spec


class UnderpoweredSpecError(ServiceError):
    """The spec's gate cannot reach its wanted power at its claims at the known noise."""

    code = "underpowered"
    status = 409


def spec_power(spec: GateSpec) -> dict[str, Any] | None:
    """The gate's power at its claims at the engagement's noise: None for a spec that is not
    G3; `available` False when no noise is known or the spec claims nothing."""
    if spec.gate.kind != Gate.Kind.G3:
        return None
    found = spec_operating_characteristic(spec, spec.gate)
    if not found.get("available"):
        return {"available": False, "reason": found.get("reason", "")}
    at_claims = found["gate"]["at_claims"]
    power, wanted = float(at_claims["pass"]), float(found["min_power"])
    return {
        "available": True,
        "power": power,
        "min_power": wanted,
        "half_width_95": float(at_claims["half_width_95"]["pass"]),
        "noise": found["noise"]["source"],
        "sd_log_ratio": float(found["noise"]["sd_log_ratio"]),
        "underpowered": power < wanted,
    }


def spec_power_check_signing(spec: GateSpec, *, acknowledge: bool) -> dict[str, Any] | None:
    """With `statistics.require_power` (the shipped template sets it), refuse to sign an
    underpowered spec unless acknowledged. Returns what an acknowledgement records (None when
    there is nothing to acknowledge). A spec with `require_power: false` states in what both
    sign that they run it whatever its power; the gate page shows that power all the same."""
    if not (spec.document.get("statistics") or {}).get("require_power"):
        return None
    power = spec_power(spec)
    if power is None:
        return None
    if not power["available"]:
        raise UnderpoweredSpecError(
            f"the spec requires power but {power['reason']}", field="statistics.require_power"
        )
    if not power["underpowered"]:
        return None
    proposals = _proposals(spec, power)
    if not acknowledge:
        fixes = "; or ".join(map(_priced, proposals)) or (
            "no repetitions within the schema's cap reach it: claim larger effects or fewer cells"
        )
        raise UnderpoweredSpecError(
            f"at {power['noise']} the gate passes {power['power']:.0%} of the time with every "
            f"clause at its claimed effect, under the {power['min_power']:.0%} the spec wants: "
            f"make it decisive ({fixes}) or sign acknowledging that it is underpowered",
            field="acknowledge_underpowered",
        )
    return {**power, "proposals": proposals}


def spec_power_acknowledged(spec: GateSpec) -> bool:
    """Both parties signed this version acknowledging it is underpowered."""
    return _both_acknowledged(spec) is not None


def _both_acknowledged(spec: GateSpec) -> dict | None:
    """The latest acknowledgement (power, noise) when both parties signed this version
    acknowledging it is underpowered, else None."""
    rows = spec.signatures.filter(digest=spec.digest, acknowledged_power__isnull=False)
    found = list(rows.order_by("id").values_list("party", "acknowledged_power"))
    return found[-1][1] if len({party for party, _ in found}) == 2 else None


def spec_acknowledgement_line(spec: GateSpec) -> str:
    """For the stop-loss review: the sentence saying both parties signed this version knowing
    it was underpowered, with the power and noise they signed at; empty when they did not."""
    acknowledged = _both_acknowledged(spec)
    if acknowledged is None:
        return ""
    cv_pct = cv_from_sd(acknowledged["sd_log_ratio"])
    source = acknowledged["noise"]
    # operating_characteristic words a stated noise "the spec's stated CV N % (source)": the
    # line names the CV itself, so it keeps the source alone.
    if source.startswith("the spec's stated CV"):
        rules = spec.document.get("statistics") or {}
        source = rules.get("noise_source") or "stated in the spec"
    return (
        "Both parties signed this spec acknowledging it was underpowered: it passes "
        f"{100 * acknowledged['power']:.3g} % at its claims at noise CV {cv_pct:.3g} % ({source})"
    )


def gate_check_power(gate: Gate) -> None:
    """With `statistics.require_power`, refuse an attempt whose gate would pass less often than
    `min_power` with every clause at its claimed effect, unless both parties acknowledged it."""
    spec = gate.current_spec
    rules = spec.document.get("statistics") or {}
    if gate.kind != Gate.Kind.G3 or not rules.get("require_power"):
        return
    power = spec_power(spec)
    if power is None or not power["available"]:
        raise UnderpoweredSpecError(
            "the spec requires power but no noise is known (run G2 or state noise_cv_pct)",
            field="statistics.require_power",
        )
    if power["underpowered"] and not spec_power_acknowledged(spec):
        raise UnderpoweredSpecError(
            f"at the measured noise the gate passes {power['power']:.0%} of the time with every "
            f"clause at its claimed effect; the spec requires {power['min_power']:.0%} (or both "
            "parties' acknowledgement that it is underpowered)",
            field="statistics.require_power",
        )


def _priced(proposal: dict[str, Any]) -> str:
    hours = proposal["host_hours"]
    return proposal["text"] + ("" if hours is None else f" [{hours:.3g} host hours an attempt]")


def _proposals(spec: GateSpec, power: dict[str, Any]) -> list[dict[str, Any]]:
    """What would make it decisive, priced in host hours where a completed run tells them."""
    typed = parse_spec(spec.document, "G3")
    hours = gate_hours_per_repetition(spec.gate)
    found = proposals_for(typed, power["sd_log_ratio"], hours, power["min_power"])
    return [dict(proposal) for proposal in found]
