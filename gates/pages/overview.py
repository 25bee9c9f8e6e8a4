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
    readout: dict | None


CLEARED = ("passed", "waived")


def verdict_words(verdict: str) -> str:
    """A verdict as a reader says it: "pass", "inconclusive", "infra error"; any status the
    engine adds later (e.g. an acknowledged underpowered one) reads by its own name."""
    return verdict.replace("_", " ")


def did_not_pass(verdict: str) -> str:
    """Why a gate is under review, without calling an inconclusive verdict a failure."""
    if verdict == "fail":
        return "failed"
    return f"did not pass (latest verdict: {verdict_words(verdict)})"


def qualifiers(gate: GateLike) -> list[str]:
    """What a verdict must never be shown without: a rehearsal does not count, a compressed
    soak ran for minutes, not hours (from the gate's stored readout of its latest decision)."""
    latest = (gate.readout or {}).get("latest_decision") or {}
    words = ["rehearsal"] if latest.get("rehearsal") else []
    return words + (["compressed"] if latest.get("compressed") else [])


def gate_label(gate: GateLike) -> str:
    """What the strip says on a gate: its verdict once decided or waived (with its qualifiers),
    else its state."""
    if gate.state == "waived":
        return "waived"
    if gate.state == "running":
        return "running"
    if gate.verdict != "pending":
        return " · ".join([verdict_words(gate.verdict), *qualifiers(gate)])
    return gate.state


def gate_tone(gate: GateLike) -> str:
    """The CSS class that colours the gate: by verdict when there is one, else by state."""
    if gate.state in ("waived", "running", "locked") or gate.verdict == "pending":
        return f"state-{gate.state}"
    return f"verdict-{gate.verdict}"


def next_action(engagement_state: str, gates: Sequence[GateLike]) -> str:
    """The one thing the engagement waits for, as the list's last column says it."""
    waived = [gate.kind for gate in gates if gate.state == "waived"]
    done = "Done: every gate passed"
    if waived:
        done = f"Done: {' and '.join(waived)} waived, every other gate passed"
    if engagement_state != "active":
        return {"passed": done, "stopped": "Stopped at stop-loss"}.get(
            engagement_state, f"Engagement {engagement_state}"
        )
    for gate in gates:
        if gate.stop_loss_review:
            return (
                f"Stop-loss review of {gate.kind} ({verdict_words(gate.verdict)}): "
                "a vendor admin stops or waives"
            )
        if gate.state == "running":
            return f"{gate.kind} is running"
        if gate.state == "waived" or (gate.state == "decided" and gate.verdict == "pass"):
            continue
        if gate.state == "locked":
            return f"{gate.kind} opens when the gate before it passes"
        if gate.verdict == "pending":
            return f"Start a {gate.kind} run"
        return f"Re-run {gate.kind} (last verdict {verdict_words(gate.verdict)})"
    rest = done.removeprefix("Done: ")
    return rest[0].upper() + rest[1:]
