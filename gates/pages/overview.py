"""Where an engagement stands, in words: each gate's label and the one thing to do next.
Pure: reads the attributes of already-loaded objects, no queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gates import figures
from gates.history.series import clause_words
from gates.pages.report.tables import G1_RULES, G4_RULES

CHECK_RULES = {**G1_RULES, **G4_RULES}  # a check's comparison in words, and its unit


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


# --- "what happened and what next", at the top of a gate or run page -------------------------

NEXT_GATE = {"G1": "G2", "G2": "G3", "G3": "G4"}


def deciding_clause(verdict: str, clauses: Sequence[dict]) -> dict | None:
    """The clause or check that decided: the first whose verdict is the gate's (a failing one
    for a fail, an undecided one for an inconclusive); None when none matches."""
    return next((row for row in clauses if row.get("verdict") == verdict), None)


def clause_sentence(row: dict) -> str:
    """ "TTFT p50 reduction, offload vs baseline at c=16: 22.1 % (18 to 26.2 %), bar 29 %: the
    interval straddles…": the clause in the words the spec pages use."""
    unit = row.get("unit") or CHECK_RULES.get(str(row.get("metric")), ("", ""))[1]
    unit = "" if unit == "version" else unit
    name = clause_words(row)
    tiers = row.get("tiers")
    where = f" at c={tiers}" if isinstance(tiers, int) else ""
    if row.get("estimate") is not None or row.get("low") is not None:
        estimate, low, high = figures.estimate_interval(
            row.get("estimate"), row.get("low"), row.get("high"), unit
        )
        bar = figures.number(row.get("threshold"), unit)
        seen = f"{estimate} (interval {low} to {high}), bar {bar}"
    else:
        observed, expected = _fact(row.get("observed"), unit), _fact(row.get("expected"), unit)
        seen = f"observed {observed}, expected {expected}"
    cause = f": {row['cause']}" if row.get("cause") else ""
    return f"{name}{where}: {seen}{cause}"


def _fact(value: object, unit: str) -> str:
    if figures.finite(value) is not None:
        return figures.number(value, unit)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return figures.DASH if value in (None, "", [], {}) else str(value)


def gate_summary(gate: GateLike, clauses: Sequence[dict], *, running: bool = False) -> dict:
    """What happened to the gate, in one line; the deciding clause in words with its number
    and bar; and who must act next: "vendor", "customer" or "nobody"."""
    verdict = gate.verdict
    decided = deciding_clause(verdict, clauses) if verdict in ("fail", "inconclusive") else None
    summary = {
        "tone": gate_tone(gate),
        "happened": _happened(gate),
        "deciding": clause_sentence(decided) if decided else "",
    }
    return {**summary, **_next(gate, running)}


def _happened(gate: GateLike) -> str:
    label = ", ".join([verdict_words(gate.verdict), *qualifiers(gate)])
    if gate.state == "waived":
        return f"{gate.kind} was waived by a vendor admin (the engine's verdict: {label})."
    if gate.state == "running":
        return f"{gate.kind} is running."
    if gate.verdict == "pending":
        return f"{gate.kind} has no verdict yet ({gate.state})."
    if gate.verdict == "pass":
        return f"{gate.kind} passed ({label})."
    if gate.verdict == "fail":
        return f"{gate.kind} failed ({label})."
    return f"{gate.kind} did not pass: {label}."


def _next(gate: GateLike, running: bool) -> dict[str, str]:
    """Who acts next and what they do."""
    later = NEXT_GATE.get(gate.kind)
    if running or gate.state == "running":
        return {"who": "nobody", "next": "Wait: the run is under way; this page follows it."}
    if gate.stop_loss_review:
        return {
            "who": "vendor",
            "next": "A vendor admin stops the engagement or waives the gate (attempts spent).",
        }
    if gate.state == "locked":
        return {"who": "nobody", "next": "Opens when the gate before it passes or is waived."}
    if gate.state == "waived" or gate.verdict == "pass":
        if later:
            return {"who": "vendor", "next": f"The vendor runs {later} (it is open now)."}
        return {"who": "nobody", "next": "Nothing: this was the last gate."}
    if gate.verdict == "pending":
        return {"who": "vendor", "next": f"The vendor starts a {gate.kind} run."}
    if gate.verdict == "infra_error":
        return {
            "who": "vendor",
            "next": "The vendor fixes the host or network and re-runs; this does not count.",
        }
    if gate.verdict == "inconclusive":
        return {
            "who": "vendor",
            "next": f"The vendor re-runs {gate.kind}: more repetitions can narrow the interval.",
        }
    return {"who": "vendor", "next": f"The vendor fixes the cause and re-runs {gate.kind}."}


def run_summary(
    gate: GateLike, *, state: str, outcome: str, reason: str, verdict: str | None, clauses: list
) -> dict:
    """A run page's summary: the run's own verdict and deciding clause once decided; a run
    that ended without one says why, and that it does not count as a product failure."""
    if verdict is not None:
        decided = deciding_clause(verdict, clauses) if verdict in ("fail", "inconclusive") else None
        return {
            "tone": f"verdict-{verdict}",
            "happened": f"This run's verdict: {verdict_words(verdict)}.",
            "deciding": clause_sentence(decided) if decided else "",
            **_next(gate, running=False),
        }
    if state in ("queued", "running"):
        return {
            "tone": f"run-{state}",
            "happened": f"The run is {state}.",
            "deciding": "",
            **(_next(gate, running=True)),
        }
    why = f": {reason}" if reason else ""
    return {
        "tone": f"outcome-{outcome}",
        "happened": f"The run ended without a verdict ({outcome.replace('_', ' ')}){why}.",
        "deciding": "It does not count toward stop-loss."
        if outcome in ("infra_error", "canceled")
        else "",
        "who": "vendor",
        "next": f"The vendor fixes the cause and starts another {gate.kind} run.",
    }
