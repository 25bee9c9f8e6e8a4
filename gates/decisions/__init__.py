"""The decision engine: one verdict function per gate kind and the one dispatcher from a gate
kind to its engine, plus the stop-loss rule. Pure: a typed spec and plain evidence in, a typed
decision (documents.decision, JSON-able) out; imports no Django and does no I/O (a test
checks). G1 is in g1.py, G2 in g2.py, G3 in g3.py (with clauses.py, inference.py, validity.py),
G4 in g4.py.

Every engine reads a spec that gates.specs.validation.parse_spec accepted (it runs where a spec
is saved) and does not check it again; evidence is checked here and refused with EvidenceError.
"""

from __future__ import annotations

from typing import Any, get_args, overload

from documents.decision import (
    Decision,
    G1Decision,
    G2Decision,
    G3Decision,
    G4Decision,
    StopLossReview,
    Verdict,
)
from documents.spec import G1Spec, G2Spec, G3Spec, G4Spec, Spec
from gates.decisions.clauses import parse_clauses
from gates.decisions.g1 import decide_g1
from gates.decisions.g2 import decide_g2
from gates.decisions.g3 import decide_g3
from gates.decisions.g4 import decide_g4
from gates.decisions.validity import EvidenceError
from gates.specs.schema import GATE_KINDS, KNOWN_METRICS

__all__ = [
    "KNOWN_METRICS",
    "VERDICTS",
    "EvidenceError",
    "SpecFieldError",
    "decide_g1",
    "decide_g2",
    "decide_g3",
    "decide_g4",
    "decide_gate",
    "parse_clauses",
    "stop_loss_review",
]

VERDICTS: tuple[str, ...] = get_args(Verdict)


class SpecFieldError(ValueError):
    """A value the dispatcher or the stop-loss rule cannot use; `field` names it."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@overload
def decide_gate(spec: G1Spec, evidence: Any, context: Any = None) -> G1Decision: ...
@overload
def decide_gate(spec: G2Spec, evidence: Any, context: Any = None) -> G2Decision: ...
@overload
def decide_gate(spec: G3Spec, evidence: Any, context: Any = None) -> G3Decision: ...
@overload
def decide_gate(spec: G4Spec, evidence: Any, context: Any = None) -> G4Decision: ...
@overload
def decide_gate(spec: Spec, evidence: Any, context: Any = None) -> Decision: ...
def decide_gate(spec: Spec, evidence: Any, context: Any = None) -> Decision:
    """Dispatch on spec["gate"]: G1 facts, G2 observations, G3 measurements or G4 windows.
    The evidence is untrusted JSON, checked by each engine."""
    # A caller may still hand over JSON that never went through parse_spec.
    kind = spec.get("gate") if isinstance(spec, dict) else None
    if kind not in GATE_KINDS:
        raise SpecFieldError("gate", f"unknown gate kind {kind!r}; use G1, G2, G3 or G4")
    if spec["gate"] == "G1":
        return decide_g1(spec, evidence)
    if spec["gate"] == "G2":
        return decide_g2(spec, evidence, context)
    if spec["gate"] == "G3":
        return decide_g3(spec, evidence, context)
    return decide_g4(spec, evidence, context)


def stop_loss_review(verdicts: list[str], max_attempts: int) -> StopLossReview:
    """Whether a gate's attempt history opens stop-loss review.

    Only product failures (`fail`) count: infra errors, invalid and inconclusive attempts are
    re-runs, not strikes. A gate that has passed never opens review.
    """
    if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
        raise SpecFieldError("stop_loss.max_attempts", "must be a positive integer")
    if not isinstance(verdicts, list):
        raise EvidenceError("verdicts", "must be a list of attempt verdicts")
    for i, verdict in enumerate(verdicts):
        if verdict not in (*VERDICTS, "pending"):
            raise EvidenceError(f"verdicts[{i}]", f"unknown verdict {verdict!r}")
    failures = verdicts.count("fail")
    review = failures >= max_attempts and "pass" not in verdicts
    reason = (
        f"{failures} failed attempt(s) of {max_attempts} allowed: stop-loss review"
        if review
        else f"{failures} failed attempt(s) of {max_attempts} allowed"
    )
    left = 0 if "pass" in verdicts else max(max_attempts - failures, 0)
    return {
        "review": review,
        "failures": failures,
        "max_attempts": max_attempts,
        "attempts_left": left,
        "reason": reason,
    }
