"""Where an engagement stands, in words: each gate's label and the one thing to do next.
Pure: reads the attributes of already-loaded objects, no queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class GateLike(Protocol):
    kind: str
    state: str
    verdict: str
    stop_loss_review: bool


CLEARED = ("passed", "waived")


def gate_label(gate: GateLike) -> str:
    """What the strip says on a gate: its verdict once decided or waived, else its state."""
    if gate.state == "waived":
        return "waived"
    if gate.state == "running":
        return "running"
    if gate.verdict != "pending":
        return gate.verdict.replace("_", " ")
    return gate.state


def gate_tone(gate: GateLike) -> str:
    """The CSS class that colours the gate: by verdict when there is one, else by state."""
    if gate.state in ("waived", "running", "locked") or gate.verdict == "pending":
        return f"state-{gate.state}"
    return f"verdict-{gate.verdict}"


def next_action(engagement_state: str, gates: Sequence[GateLike]) -> str:
    """The one thing the engagement waits for, as the list's last column says it."""
    if engagement_state != "active":
        return {"passed": "Done: every gate passed", "stopped": "Stopped at stop-loss"}.get(
            engagement_state, f"Engagement {engagement_state}"
        )
    for gate in gates:
        if gate.stop_loss_review:
            return f"Stop-loss review of {gate.kind}: a vendor admin stops or waives"
        if gate.state == "running":
            return f"{gate.kind} is running"
        if gate.state == "waived" or (gate.state == "decided" and gate.verdict == "pass"):
            continue
        if gate.state == "locked":
            return f"{gate.kind} opens when the gate before it passes"
        if gate.verdict == "pending":
            return f"Start a {gate.kind} run"
        return f"Re-run {gate.kind} (last verdict {gate.verdict.replace('_', ' ')})"
    return "Every gate passed"
